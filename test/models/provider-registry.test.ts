import test from 'ava';
import type { z } from 'zod';
import type { Provider } from '../../lib/models/provider.js';
import { createProvider, providerRegistry, type ProviderRegistry } from '../../lib/models/providers/registry.js';
import { nonEmptyString, settingsObject } from '../../lib/settings/schemas.js';

// A kind of a team's own, beside the built-in ones: a registry is a plain object, extended by spreading it.
const inHouseOptions = settingsObject({ id: nonEmptyString, region: nonEmptyString });
const kinds = {
  ...providerRegistry,
  'in-house': { options: inHouseOptions, create: ({ id }: z.input<typeof inHouseOptions>): Provider => ({ id }) },
} satisfies ProviderRegistry;

test('createProvider() makes a kind of an extended registry, and still the built-in kinds', (t) => {
  t.is(createProvider({ kind: 'in-house', id: 'house', region: 'eu' }, kinds).id, 'house');
  t.truthy(createProvider({ kind: 'echo', id: 'local' }, kinds).chatCompletions);
});

test("createProvider() refuses a kind its registry does not have, naming the registry's kinds", (t) => {
  t.throws(() => createProvider({ kind: 'in-house', id: 'house', region: 'eu' } as never), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: createProvider(): kind must be one of openai, anthropic, echo',
  });
  t.throws(() => createProvider({ kind: 'azure', id: 'a' } as never, kinds), {
    instanceOf: TypeError,
    message: 'koa-model-gateway: createProvider(): kind must be one of openai, anthropic, echo, in-house',
  });
});
