export {
  ConfigError,
  listenError,
  commonConfig,
  commonEnvShape,
  intVar,
  optionalIntVar,
  choiceVar,
  optionalDecimalVar,
  pathVar,
  proxySecretVar,
  hostPortVar,
  logLevels,
  nodeListVar,
  parseEnv,
  redisRisksVar,
  redisUrlVar,
  stringVar,
  type CommonConfig,
} from './config.js';
export {
  REQUEST_TIMEOUT_MS,
  createRedis,
  waitUntilReady,
  type ConnectionLogger,
  type ConnectionRole,
  type CreateRedisOptions,
} from './redis.js';
export { createLogger, redactedPaths } from './logger.js';
export { replicaWaitOf } from './replica-wait.js';
export { runUntilSignal } from './shutdown.js';
export { loadConfigOrExit } from './startup.js';
export { BUDGET, attempt, retryWhile, settleWithin } from './time.js';
export * from './redis-setup/index.js';
export {
  PROXY_SECRET_MIN_LENGTH,
  TICKET_MAX_BYTES,
  TICKET_PREFIX,
  TICKET_TTL_MS,
  answerLine,
  readAnswer,
  readFirstLine,
  readUntil,
  readTicket,
  ticketKey,
  ticketLine,
  type Ticket,
  type TunnelRefusal,
} from './proxy-ticket.js';
export {
  CHANNEL,
  EXEC_REQUEST_MAX_BYTES,
  FRAME_MAX_BYTES,
  FrameDecoder,
  execRequestSchema,
  frame,
  readSize,
  type ExecRequest,
  type ExecStatus,
  type Frame,
} from './exec-frames.js';
