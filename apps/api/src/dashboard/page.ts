// The coordinator view: one HTML page, its stylesheet and its script (apps/api/static/dashboard/),
// served under /dashboard. No build step and no inline script, so the page runs under a strict
// Content-Security-Policy. Read once, when the API starts.
import { readFileSync } from 'node:fs';

const dir = new URL('../../static/dashboard/', import.meta.url);
const read = (name: string): string => readFileSync(new URL(name, dir), 'utf8');

export const pageHtml = read('index.html');
export const pageCss = read('app.css');
export const pageJs = read('app.js');
