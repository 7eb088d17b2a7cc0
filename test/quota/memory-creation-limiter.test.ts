import test from 'ava';
import { MemoryCreationLimiter } from '../../lib/stores/memory/creation-limiter.js';
import { creationLimiterContract } from '../../lib/testing/creation-limiter-contract.js';

creationLimiterContract(test, 'memory', async (options) => new MemoryCreationLimiter(options));
