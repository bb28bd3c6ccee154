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

// The dashboard's terminal: xterm.js, from its npm package, served as it ships (loaded by the page when
// an operator opens a terminal).
const require = createRequire(import.meta.url);
// Without its source map's comment: the map is not served (a browser's developer tools would ask for it).
export const xtermJs = readFileSync(require.resolve('@xterm/xterm/lib/xterm.js'), 'utf8').replace(
  /\n\/\/# sourceMappingURL=\S+\s*$/,
  '\n',
);
export const xtermCss = readFileSync(require.resolve('@xterm/xterm/css/xterm.css'), 'utf8');
