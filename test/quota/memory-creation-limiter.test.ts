import test from 'ava';
import { MemoryCreationLimiter } from '../../lib/quota/memory-creation-limiter.js';
import { creationLimiterContract } from '../helpers/quota-contract.js';

creationLimiterContract(test, 'memory', async (options) => new MemoryCreationLimiter(options));
