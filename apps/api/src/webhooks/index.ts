// Webhook building blocks the store, routes and delivery worker call: signing, the address guard and its resolver, one delivery attempt.
export * from './address-guard.js';
export * from './host-resolver.js';
export * from './post-webhook.js';
export * from './signature.js';
