// The host's side of the session proxy: with PROXY_SECRET set, a listener on PROXY_LISTEN that API
// processes reach at PROXY_ADVERTISE (published with each heartbeat).
import { ticketKey } from '@cq/service-kit';
import type { Logger } from 'pino';
import type { WorkerConfig } from '../config.js';
import type { SessionLauncher } from '../session-process.js';
import { ProxyListener } from './listener.js';

export { ProxyListener } from './listener.js';
export { netnsPid, openSessionPort, type SessionNetTarget } from './session-ports.js';

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
  logger: Logger,
): Promise<HostProxy | undefined> {
  if (config.proxySecret === undefined) return undefined;
  const listener = new ProxyListener({
    key: ticketKey(config.proxySecret),
    target: (sessionId) => launcher.netTarget?.(sessionId),
    logger,
  });
  launcher.onEnded?.((sessionId) => listener.sessionEnded(sessionId));
  const bound = await listener.listen(config.proxyListen.host, config.proxyListen.port);
  const advertise = hostPort(config.proxyAdvertise ?? bound);
  logger.info({ listen: hostPort(bound), advertise }, 'session proxy listener started');
  return { advertise, close: () => listener.close() };
}
