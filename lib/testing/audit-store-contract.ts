import type { AuditEntry, AuditStore, NewAuditEntry } from '../admin/audit-store.js';
import { AUDIT_CURSOR } from '../admin/audit-store.js';
import type { StoreContractTest } from './store-contract-test.js';

const entry = (overrides: Partial<NewAuditEntry> = {}): NewAuditEntry => ({
  at: 1_900_000_000,
  action: 'key.created',
  actor: { type: 'admin_token', id: 'adm_aaaaaaaaaaaaaaaaaaaaaaaa', name: 'ops' },
  keyId: 'key_one',
  account: 'acme',
  tokenId: null,
  replacementId: null,
  userId: null,
  fields: ['account', 'scopes'],
  changes: null,
  address: '127.0.0.1',
  ...overrides,
});

async function everyPage(store: AuditStore, limit: number): Promise<AuditEntry[][]> {
  const pages: AuditEntry[][] = [];
  let cursor: string | undefined;
  // Bounded: a store whose cursor never ends fails the test instead of hanging it.
  do {
    const page = await store.list({}, { limit, ...(cursor === undefined ? {} : { cursor }) });
    pages.push(page.entries);
    cursor = page.nextCursor ?? undefined;
  } while (cursor !== undefined && pages.length < 20);
  return pages;
}

/** The behaviour every AuditStore must have; run once per implementation. */
export function auditStoreContract(test: StoreContractTest, name: string, makeStore: () => Promise<AuditStore>): void {
  test(`${name}: an appended entry is listed as it was given, with an id`, async (t) => {
    const store = await makeStore();
    const given = entry({ actor: { type: 'cli', id: null, name: 'alice' }, fields: [], address: null, tokenId: 'adm_x', keyId: null, account: null });
    const recorded = await store.append(given);
    t.regex(recorded.id, /^aud_[A-Za-z0-9]{24}$/);
    t.deepEqual(recorded, { id: recorded.id, ...given });
    t.deepEqual(await store.list({}, { limit: 10 }), { entries: [recorded], nextCursor: null });
  });

  test(`${name}: a person's action keeps who they are, the user acted on and the values changed`, async (t) => {
    const store = await makeStore();
    const given = entry({
      action: 'user.updated',
      actor: { type: 'user', id: 'usr_aaaaaaaaaaaaaaaaaaaaaaaa', name: 'ada@example.com' },
      keyId: null,
      account: null,
      userId: 'usr_bbbbbbbbbbbbbbbbbbbbbbbb',
      fields: ['role', 'disabled'],
      changes: { role: { from: null, to: 'operator' }, disabled: { from: false, to: true } },
    });
    const recorded = await store.append(given);
    t.deepEqual(recorded, { id: recorded.id, ...given });
    t.deepEqual((await store.list({}, { limit: 10 })).entries, [recorded]);
  });

  test(`${name}: a budget alert is recorded as the gateway's, and listed by its action and account`, async (t) => {
    const store = await makeStore();
    const given = entry({
      action: 'budget.alert_sent',
      actor: { type: 'gateway', id: null, name: null },
      account: 'acme',
      keyId: null,
      fields: ['day', '80%', 'delivered'],
      address: null,
    });
    const recorded = await store.append(given);
    t.deepEqual(await store.list({ action: 'budget.alert_sent', account: 'acme' }, { limit: 10 }), { entries: [recorded], nextCursor: null });
  });

  test(`${name}: lists newest first, a page at a time, each entry once`, async (t) => {
    const store = await makeStore();
    const appended: AuditEntry[] = [];
    // Same second for all: the order of appending decides, not the clock.
    for (let index = 0; index < 7; index += 1) appended.push(await store.append(entry({ keyId: `key_${index}` })));
    const pages = await everyPage(store, 3);
    t.deepEqual(
      pages.map((page) => page.map((listed) => listed.keyId)),
      [['key_6', 'key_5', 'key_4'], ['key_3', 'key_2', 'key_1'], ['key_0']],
    );
    const first = await store.list({}, { limit: 3 });
    t.regex(first.nextCursor ?? '', AUDIT_CURSOR);
    // A page exactly at the end says so.
    const six = await store.list({}, { limit: 6 });
    t.deepEqual(
      (await store.list({}, { limit: 1, cursor: six.nextCursor ?? '' })).entries.map((listed) => listed.keyId),
      ['key_0'],
    );
    t.is((await store.list({}, { limit: 7 })).nextCursor, null);
    // Appending after a page was read does not shift the pages that follow it.
    await store.append(entry({ keyId: 'key_7' }));
    t.deepEqual(
      (await store.list({}, { limit: 3, cursor: first.nextCursor ?? '' })).entries.map((listed) => listed.keyId),
      ['key_3', 'key_2', 'key_1'],
    );
  });

  test(`${name}: filters by since, action, key (acted on or made by a rotation) and account, together with pages`, async (t) => {
    const store = await makeStore();
    await store.append(entry({ at: 100, keyId: 'key_a', account: 'acme' }));
    await store.append(entry({ at: 200, action: 'key.rotated', keyId: 'key_a', replacementId: 'key_b', account: 'acme' }));
    await store.append(entry({ at: 300, action: 'account.limits_set', keyId: null, account: 'globex', fields: ['costPerDay'] }));
    await store.append(entry({ at: 400, action: 'key.revoked', keyId: 'key_b', account: 'acme' }));
    await store.append(entry({ at: 500, action: 'session.opened', keyId: null, account: null, fields: [] }));
    const actions = async (filter: Parameters<AuditStore['list']>[0], limit = 10) =>
      (await store.list(filter, { limit })).entries.map((listed) => `${listed.action}@${listed.at}`);
    t.deepEqual(await actions({ since: 300 }), ['session.opened@500', 'key.revoked@400', 'account.limits_set@300']);
    t.deepEqual(await actions({ action: 'key.rotated' }), ['key.rotated@200']);
    t.deepEqual(await actions({ keyId: 'key_b' }), ['key.revoked@400', 'key.rotated@200']);
    t.deepEqual(await actions({ keyId: 'key_a' }), ['key.rotated@200', 'key.created@100']);
    t.deepEqual(await actions({ account: 'globex' }), ['account.limits_set@300']);
    t.deepEqual(await actions({ account: 'acme', since: 150 }), ['key.revoked@400', 'key.rotated@200']);
    t.deepEqual(await actions({ account: 'nobody' }), []);
    const page = await store.list({ account: 'acme' }, { limit: 2 });
    t.deepEqual(
      page.entries.map((listed) => listed.at),
      [400, 200],
    );
    const rest = await store.list({ account: 'acme' }, { limit: 2, cursor: page.nextCursor ?? '' });
    t.deepEqual(rest, { entries: [(await store.list({ action: 'key.created' }, { limit: 1 })).entries[0] as AuditEntry], nextCursor: null });
  });

  test(`${name}: an entry read back is a copy: changing it changes nothing stored`, async (t) => {
    const store = await makeStore();
    const recorded = await store.append(entry());
    recorded.fields.push('secret');
    const [listed] = (await store.list({}, { limit: 1 })).entries;
    t.deepEqual(listed?.fields, ['account', 'scopes']);
    listed?.fields.push('other');
    t.deepEqual((await store.list({}, { limit: 1 })).entries[0]?.fields, ['account', 'scopes']);
  });
}
