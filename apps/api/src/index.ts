export { buildApp, BODY_LIMIT, type ApiApp, type BuildAppOptions } from './app.js';
export { loadApiConfig, type ApiConfig } from './config.js';
