import { pino } from 'pino';
import { RuntimeLauncher } from '/work/main/apps/worker/dist/session-process.js';
import { planContainment } from '/work/main/apps/worker/dist/containment.js';
const { plan, fallback } = planContainment({ containment: 'auto', memoryMb: 64, pidsMax: 32, user: undefined });
console.log(plan.mode, fallback, plan.cgroups?.version);
const l = new RuntimeLauncher({ command: process.argv[2], logger: pino(), containment: plan });
await l.open();
const t0 = performance.now();
const h = l.launch({ sessionEnv: { SESSION_ID: 'x', USER_ID: 'u', FENCE: '1', DEADLINE: '0', SESSION_METADATA: '{}' }, graceMs: 300,
  deadlineAt: performance.now() + 60000, holdsUntil: performance.now() + 60000,
  onOutput: (s, line) => console.log(Math.round(performance.now() - t0), s, line.slice(0, 200)) });
setTimeout(() => h.terminate(), Number(process.argv[3] ?? 2000));
console.log(await h.exited);
await l.close();
