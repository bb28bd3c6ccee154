export {
  REDIS_RISKS,
  judge,
  judgeNode,
  oneLine,
  refusalLine,
  type Finding,
  type NodeFacts,
  type RedisRisk,
  type Refusal,
} from './findings.js';
export { infoFacts, parseInfo, type InfoFacts } from './info.js';
export { probeNode, refusalOf } from './probe.js';
export {
  REDIS_COMMANDS,
  aclRules,
  keyPattern,
  probeCalls,
  probeNames,
  type CommandSource,
  type ProbeCall,
  type RedisCommand,
} from './redis-commands.js';
export { RedisSetup, credentialsRefused, type RedisSetupOptions, type SetupLogger } from './redis-setup.js';
export {
  REPLAY_FIXED_IN,
  aofReplayChecksDefaultUser,
  compareRedisVersions,
  parseRedisVersion,
  type RedisVersion,
} from './redis-version.js';
