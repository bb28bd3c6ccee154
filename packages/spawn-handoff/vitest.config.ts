import { redisTestConfig } from '@cq/test-harness/vitest-config';

export default redisTestConfig();
