import type { RouterMiddleware } from '@koa/router';
import type { ApiKeyRecord } from '../auth/key-store.js';
import { keyStatus } from '../auth/keys.js';
import type { FileStore } from '../files/file-store.js';
import { usdOfPico } from '../picodollars.js';
import { usageReport } from '../usage/usage-report.js';
import type { UsageStore, UsageRow } from '../usage/usage-store.js';
import type { AdminApi } from './admin-router.js';
import { accountName, parseFields } from './key-fields.js';
import { usageObject, usageQuerySchema } from './usage-query.js';

/** `GET /accounts` reads this many accounts' files at once. */
const ACCOUNT_READS_AT_ONCE = 8;

interface AccountTotals {
  /** Its active keys. */
  keys: number;
  requests: number;
  input: number;
  output: number;
  costPicoUsd: bigint;
}

/** Every account that has a key, in name order, with its active keys and the usage rows of its keys folded in. */
function accountTotals(records: ApiKeyRecord[], byKey: UsageRow[], nowSeconds: number): Array<[string, AccountTotals]> {
  const accounts = new Map<string, AccountTotals>();
  const accountOfKey = new Map<string, string>();
  for (const record of records) {
    accountOfKey.set(record.id, record.account);
    const entry = accounts.get(record.account) ?? { keys: 0, requests: 0, input: 0, output: 0, costPicoUsd: 0n };
    if (keyStatus(record, nowSeconds) === 'active') entry.keys += 1;
    accounts.set(record.account, entry);
  }
  for (const row of byKey) {
    const entry = accounts.get(accountOfKey.get(row.group ?? '') ?? '');
    if (!entry) continue;
    entry.requests += row.requests;
    entry.input += row.inputTokens;
    entry.output += row.outputTokens;
    entry.costPicoUsd += row.costPicoUsd;
  }
  return [...accounts].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
}

/** The files and bytes each account keeps, a few accounts at a time: a thousand accounts make no thousand concurrent queries. */
async function keptFiles(files: Pick<FileStore, 'usage'>, accounts: string[], nowSeconds: number) {
  const kept: Array<{ files: number; bytes: number }> = [];
  for (let start = 0; start < accounts.length; start += ACCOUNT_READS_AT_ONCE) {
    const batch = accounts.slice(start, start + ACCOUNT_READS_AT_ONCE);
    kept.push(...(await Promise.all(batch.map((account) => files.usage(account, nowSeconds)))));
  }
  return kept;
}

/** Unix ms of the start of the UTC month of `nowSeconds`. */
function monthStartMs(nowSeconds: number): number {
  const now = new Date(nowSeconds * 1000);
  return Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), 1);
}

/**
 * `GET /accounts`: every account that has a key, with its active keys, files and bytes kept and
 * (with a usage store, else `null`) this UTC month's requests, tokens and cost in USD.
 */
export function listAccounts(api: AdminApi): RouterMiddleware {
  return async function listAccounts(ctx) {
    const at = api.now();
    // One summary by key for every account: its rows are folded into each key's account.
    const [records, byKey] = await Promise.all([api.keys.list(), api.usageStore?.summarize({ since: monthStartMs(at) }, 'key')]);
    const accounts = accountTotals(records, byKey ?? [], at);
    const kept = await keptFiles(
      api.files,
      accounts.map(([account]) => account),
      at,
    );
    const monthly = api.usageStore !== undefined;
    ctx.body = {
      object: 'list',
      data: accounts.map(([account, totals], index) => ({
        object: 'account_summary',
        account,
        keys: totals.keys,
        files: kept[index]?.files ?? 0,
        bytes: kept[index]?.bytes ?? 0,
        requests_this_month: monthly ? totals.requests : null,
        input_tokens_this_month: monthly ? totals.input : null,
        output_tokens_this_month: monthly ? totals.output : null,
        cost_usd_this_month: monthly ? usdOfPico(totals.costPicoUsd) : null,
      })),
    };
  };
}

/** `GET /accounts/{account}`: files and bytes kept, creations and bytes today, and the limits. */
export function showAccount(api: AdminApi): RouterMiddleware {
  const { limits } = api;
  return async function showAccount(ctx) {
    const account = parseFields(accountName, ctx.params.account, 'account');
    const [kept, today] = await Promise.all([api.files.usage(account, api.now()), api.creationLimiter?.usage(account)]);
    ctx.body = {
      object: 'account',
      account,
      files: kept.files,
      bytes: kept.bytes,
      creations_today: today?.createsToday ?? null,
      bytes_today: today?.bytesToday ?? null,
      limits: {
        max_files: limits.maxFiles,
        max_stored_bytes: limits.maxStoredBytes,
        max_file_bytes: limits.maxFileBytes,
        creates_per_minute: limits.createsPerMinute,
        creates_per_day: limits.createsPerDay,
        bytes_per_day: limits.bytesPerDay,
      },
    };
  };
}

/** `GET /usage?account=&key=&since=&by=day|model|key&series=day|model|key`: requests and tokens of the model calls. */
export function showUsage(usageStore: Pick<UsageStore, 'summarize'>): RouterMiddleware {
  return async function showUsage(ctx) {
    const query = parseFields(usageQuerySchema, { ...ctx.query });
    const report = await usageReport(usageStore, {
      by: query.by,
      ...(query.series === undefined ? {} : { series: query.series }),
      ...(query.account === undefined ? {} : { account: query.account }),
      ...(query.key === undefined ? {} : { keyId: query.key }),
      ...(query.since === undefined ? {} : { since: query.since * 1000 }),
    });
    ctx.body = usageObject(query, report);
  };
}
