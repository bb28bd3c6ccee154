import { pino } from 'pino';
import { RuntimeLauncher } from './dist/session-process.js';
import { planContainment } from './dist/containment.js';
const [cmd, user, meta, ms] = process.argv.slice(2);
const { plan } = planContainment({ containment: 'auto', memoryMb: 64, pidsMax: 32, user: undefined });
const l = new RuntimeLauncher({ command: cmd, logger: pino({ level: 'warn' }), containment: plan });
await l.open();
const t0 = performance.now();
const h = l.launch({
  sessionEnv: { SESSION_ID: 'x', USER_ID: user, FENCE: '1', DEADLINE: '0', SESSION_METADATA: meta },
  graceMs: 300,
  deadlineAt: performance.now() + 60000,
  holdsUntil: performance.now() + 60000,
  onOutput: (s, line) => console.log(Math.round(performance.now() - t0), s, line.slice(0, 200)),
});
setTimeout(() => h.terminate(), Number(ms));
console.log(await h.exited);
await l.close();
