export { parseRateReply, type RateLimitResult } from './rate-limit.js';
export {
  gcraLimiter,
  fixedWindowLimiter,
  slidingWindowLimiter,
  type RateLimiter,
  type GcraOptions,
  type WindowOptions,
} from './limiters.js';
