import test from 'ava';
import { MemoryCreationLimiter } from '../../lib/quota/memory-creation-limiter.js';
import { creationLimiterContract } from '../helpers/quota-contract.js';

creationLimiterContract(test, 'memory', async (options) => new MemoryCreationLimiter(options));

test('the defaults are the limits of api.md section 8', (t) => {
  t.like(new MemoryCreationLimiter().limits, { createsPerMinute: 10, createsPerDay: 1000, bytesPerDay: 1_073_741_824 });
});
