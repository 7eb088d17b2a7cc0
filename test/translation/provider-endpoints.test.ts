import test from 'ava';
import { openAIProvider } from '../../lib/models/providers/openai/index.js';
import { createProvider } from '../../lib/models/providers/registry.js';

test('an openai provider speaks the endpoints it declares, both by default', (t) => {
  const both = openAIProvider({ id: 'openai' });
  t.is(typeof both.chatCompletions, 'function');
  t.is(typeof both.responses, 'function');
  const chatOnly = createProvider({ kind: 'openai', id: 'vllm', baseURL: 'http://vllm.internal:8000/v1', endpoints: ['chat.completions'] });
  t.is(typeof chatOnly.chatCompletions, 'function');
  t.is(chatOnly.responses, undefined);
  const responsesOnly = openAIProvider({ id: 'r', endpoints: ['responses'] });
  t.is(responsesOnly.chatCompletions, undefined);
  t.is(typeof responsesOnly.responses, 'function');
});

test('bad endpoints are refused when the provider is made, naming the option', (t) => {
  for (const endpoints of [[], ['responses', 'responses'], 'responses']) {
    t.throws(() => openAIProvider({ id: 'x', endpoints } as never), { message: /openAIProvider\(\): endpoints must be a non-empty list of distinct endpoints among 'chat\.completions', 'responses'/ });
  }
  t.throws(() => openAIProvider({ id: 'x', endpoints: ['messages'] } as never), { message: /openAIProvider\(\): endpoints\[0\] must be one of 'chat\.completions', 'responses'/ });
});
