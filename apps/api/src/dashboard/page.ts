// The coordinator view: one HTML page, its stylesheet and its script (apps/api/static/dashboard/),
// served under /dashboard. No build step and no inline script, so the page runs under a strict
// Content-Security-Policy. Read once, when the API starts.
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';

const dir = new URL('../../static/dashboard/', import.meta.url);
const read = (name: string): string => readFileSync(new URL(name, dir), 'utf8');

export const pageHtml = read('index.html');
export const pageCss = read('app.css');
export const pageJs = read('app.js');

// The dashboard's terminal: xterm.js and its fit addon (which sizes the terminal to the dashboard's
// panel), from their npm packages, served as they ship (loaded by the page when an operator opens a
// terminal).
const require = createRequire(import.meta.url);
/** A package's script without its source map's comment: the map is not served (a browser's developer tools would ask for it). */
const script = (path: string): string =>
  readFileSync(require.resolve(path), 'utf8').replace(/\n\/\/# sourceMappingURL=\S+\s*$/, '\n');
export const xtermJs = script('@xterm/xterm/lib/xterm.js');
export const xtermFitJs = script('@xterm/addon-fit/lib/addon-fit.js');
export const xtermCss = readFileSync(require.resolve('@xterm/xterm/css/xterm.css'), 'utf8');
