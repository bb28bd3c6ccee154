// The API's request and answer shapes (src/wire.ts: plain types, checked against the contract).
export type * from './wire.js';
