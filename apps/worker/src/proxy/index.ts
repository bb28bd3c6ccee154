// The host's side of the session proxy: with PROXY_SECRET set, a listener on PROXY_LISTEN that API
// processes reach at PROXY_ADVERTISE (published with each heartbeat).
import { spawnSync } from 'node:child_process';
import { listenError, ticketKey } from '@cq/service-kit';
import type { Logger } from 'pino';
import type { WorkerConfig } from '../config.js';
import type { ContainmentPlan } from '../containment.js';
import type { SessionLauncher } from '../session-process.js';
import { ProxyListener } from './listener.js';

export { ProxyListener } from './listener.js';
export { netnsPid, openSessionPort, type SessionNetTarget } from './session-ports.js';
export { pidNamespacePid, serveCommand, terminalArgv, type SessionExecTarget } from './session-exec.js';

/** A host's running proxy listener. */
export interface HostProxy {
  /** `host:port` API processes connect to. */
  readonly advertise: string;
  close(): Promise<void>;
}

function hostPort(address: { host: string; port: number }): string {
  return address.host.includes(':') ? `[${address.host}]:${address.port}` : `${address.host}:${address.port}`;
}

/** Starts the proxy listener when PROXY_SECRET is set; undefined otherwise. */
export async function startHostProxy(
  config: WorkerConfig,
  launcher: SessionLauncher,
  plan: Pick<ContainmentPlan, 'execArgv'>,
  logger: Logger,
): Promise<HostProxy | undefined> {
  if (config.proxySecret === undefined) return undefined;
  const listener = new ProxyListener({
    key: ticketKey(config.proxySecret),
    target: (sessionId) => launcher.target?.(sessionId),
    plan,
    logger,
  });
  launcher.onEnded?.((sessionId) => listener.sessionEnded(sessionId));
  // A session with a network of its own is reached through socat, started by nsenter (util-linux).
  const missing = ['socat', 'nsenter'].filter((tool) => spawnSync(tool, ['-V']).error !== undefined);
  if (missing.length > 0 && config.sessionNetwork !== 'host')
    logger.warn(
      { missing },
      `the session proxy cannot reach a session with a network of its own without ${missing.join(' and ')} ` +
        '(e.g. apt install socat util-linux): such requests will answer 502 host_unreachable',
    );
  // Commands inside sessions enter them with nsenter and setpriv; terminals run under script (util-linux).
  const execMissing = ['nsenter', 'setpriv', 'script'].filter((tool) => spawnSync(tool, ['-V']).error !== undefined);
  if (execMissing.length > 0)
    logger.warn(
      { missing: execMissing },
      `commands and terminals inside sessions need ${execMissing.join(', ')} (util-linux and bsdutils): ` +
        'without them they fail to start',
    );
  let bound: { host: string; port: number };
  try {
    bound = await listener.listen(config.proxyListen.host, config.proxyListen.port);
  } catch (err) {
    throw listenError('PROXY_LISTEN', config.proxyListen.host, config.proxyListen.port, err) ?? err;
  }
  const advertise = hostPort(config.proxyAdvertise ?? bound);
  logger.info({ listen: hostPort(bound), advertise }, 'session proxy listener started');
  return { advertise, close: () => listener.close() };
}
