// The exec section of npm run bench: commands, terminals and files inside a session (issue 47), beside
// the same work done minimally on the host.
import { type Bench, fmt, ratio } from '../bench.js';
import { benchExec } from '../exec.js';

export async function benchExecSection(bench: Bench): Promise<void> {
  const { quick, server, out, target, results } = bench;
  const exec = await benchExec(server.url, quick);
  out('## Inside a session: commands, terminal echo, streams out, beside the limit');
  out();
  out(
    'The built API and worker host with their defaults and PROXY_SECRET (the session isolated: network none, ' +
      `its files private). ${exec.samples} samples each, one at a time. The limits run on the host in a Node ` +
      'process of their own, with no API or host in the way: `nsenter` into the session’s namespaces and ' +
      '`true`; util-linux’s `script` running `cat` (the terminal a session gets); `nsenter` and the same ' +
      'output read from a pipe. No alternative a user would pick runs here (no container engine, no ' +
      'Kubernetes): `docker exec` and `kubectl exec` add a daemon and an API server to the same nsenter.',
  );
  out();
  out('| what | ours p50 / p99 ms | limit p50 / p99 ms | p50 ÷ limit |');
  out('| --- | ---: | ---: | ---: |');
  const row = (what: string, o: { p50: number; p99: number }, l: { p50: number; p99: number }): void =>
    out(
      `| ${what} | ${fmt(o.p50, 2)} / ${fmt(o.p99, 2)} | ${fmt(l.p50, 2)} / ${fmt(l.p99, 2)} | ${ratio(o.p50, l.p50)} |`,
    );
  row('`POST commands` of `true` (round trip) · nsenter + true', exec.commands.ours, exec.commands.limit);
  row('terminal keystroke echo · script running cat', exec.echo.ours, exec.echo.limit);
  out();
  const mb = exec.streamBytes / 1e6;
  out(`| stream out of the session (${fmt(mb)} MB) | MB/s | limit MB/s (nsenter, read from a pipe) | ÷ limit |`);
  out('| --- | ---: | ---: | ---: |');
  out(
    `| a terminal printing (\`head -c\` of zeros, tty) | ${fmt(exec.streams.terminalMBps)} | ${fmt(exec.streams.limitTerminalMBps)} (through script's terminal); ${fmt(exec.streams.limitMBps)} (no terminal) | ${ratio(exec.streams.terminalMBps, exec.streams.limitTerminalMBps)} |`,
  );
  out(
    `| the same without a terminal (the exec WebSocket, tty=false) | ${fmt(exec.streams.execMBps)} | ${fmt(exec.streams.limitMBps)} | ${ratio(exec.streams.execMBps, exec.streams.limitMBps)} |`,
  );
  out(
    `| \`GET files\` of a file in the session | ${fmt(exec.streams.filesMBps)} | ${fmt(exec.streams.limitCatMBps)} (cat) | ${ratio(exec.streams.filesMBps, exec.streams.limitCatMBps)} |`,
  );
  out();
  target('commands round trip of true, p50 ms', exec.commands.ours.p50, 15, true);
  target('commands round trip of true, p99 ms', exec.commands.ours.p99, 50, true);
  target('terminal keystroke echo, p50 ms', exec.echo.ours.p50, 2, true);
  target('a terminal printing, MB/s', exec.streams.terminalMBps, 200);
  target('the exec WebSocket without a terminal printing, MB/s', exec.streams.execMBps, 200);
  target('GET files, MB/s', exec.streams.filesMBps, 200);
  results['exec'] = exec;
}
