import test from 'ava';
import { adminApp } from '../helpers/admin-app.js';

// A key's budgets through the admin API, apart from admin-api.test.ts: set at creation, changed and
// removed by PATCH, refused when they are not a positive number; answers checked against docs/openapi.json.

interface KeyBody {
  id: string;
  limits: Record<string, number | null> | null;
  error?: { code: string; message: string };
}

test('a key is created with budgets in USD, PATCH changes or removes them, a bad one is 400 naming it', async (t) => {
  const app = await adminApp();
  t.teardown(() => app.close());
  const created = await app.admin('POST', '/keys', { account: 'acme', limits: { cost_per_day: 5, cost_per_month: 49.95 } });
  t.is(created.status, 201);
  const key = (await created.json()) as KeyBody;
  t.deepEqual(key.limits, { requests_per_minute: null, tokens_per_minute: null, tokens_per_day: null, cost_per_day: 5, cost_per_month: 49.95 });
  t.like((await app.keys.get(key.id))?.limits, { costPerDay: 5, costPerMonth: 49.95 });

  // Limits are replaced whole: what is left out is the default again.
  const patched = (await (await app.admin('PATCH', `/keys/${key.id}`, { limits: { cost_per_month: 50, tokens_per_day: 1000 } })).json()) as KeyBody;
  t.deepEqual(patched.limits, { requests_per_minute: null, tokens_per_minute: null, tokens_per_day: 1000, cost_per_day: null, cost_per_month: 50 });

  for (const bad of [0, -1, '5', 1e16]) {
    const refused = await app.admin('PATCH', `/keys/${key.id}`, { limits: { cost_per_day: bad } });
    t.is(refused.status, 400, String(bad));
    t.like(await refused.json(), { error: { code: 'invalid_limits', message: "Invalid 'limits.cost_per_day': must be a positive number of USD, or null" } });
  }
  t.like((await app.keys.get(key.id))?.limits, { costPerMonth: 50 });
  t.deepEqual(app.problems, []);
});
