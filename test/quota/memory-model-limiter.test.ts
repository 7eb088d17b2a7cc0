import test from 'ava';
import { MemoryModelLimiter } from '../../lib/quota/memory-model-limiter.js';
import { modelLimiterContract } from '../../lib/testing/model-limiter-contract.js';

modelLimiterContract(test, 'memory', async (clock) => new MemoryModelLimiter({ nowMs: clock }));
