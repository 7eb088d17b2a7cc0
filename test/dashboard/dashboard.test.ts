import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test, { type ExecutionContext } from 'ava';
import Koa from 'koa';
import OpenAI, { AuthenticationError, toFile } from 'openai';
import { pino } from 'pino';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { SCOPES } from '../../lib/auth/scopes.js';
import { openAIErrors } from '../../lib/errors/openai-errors.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import { dashboardRouter } from '../../reference-server/dashboard.js';
import { listen } from '../helpers/http.js';
import { PERSON_COOKIE, ssoReferenceApp, type TestProvider } from '../helpers/oidc-provider.js';
import { makePdf } from '../helpers/models-pdf.js';
import { until } from '../helpers/poll.js';
import { ROOT } from '../helpers/server-process.js';
import { throwawayPostgres } from '../helpers/server-database.js';
import { CHROMIUM, REDIS_URL, withChromium, withPostgres, withRedis } from '../helpers/services.js';
import { referenceApp, type ReferenceApp } from '../helpers/reference-app.js';

// The dashboard end to end, in Debian's Chromium, against the reference server's own app: log in
// with an admin token, create a key and use it with the openai SDK, revoke it in the page and see
// the next call refused, then see the calls on the usage page, then sign in through an OIDC
// provider as each role, on both deployments. Then money in
// the dashboard, on the embedded deployment: the cost chart and figures on the usage page, each
// key's spend against its budget on the key list, and an account's budgets set and shown against
// its spend on the account view. A screenshot of each page goes to test-artifacts/. Last, how the
// dashboard's files are served, without a browser.

const ARTIFACTS = join(ROOT, 'test-artifacts');
const HOSTILE = '<img src=x onerror=alert(1)>';

const DAY_MS = 86_400_000;

/** Debian's Chromium, headless, launched once for the file when a test first asks (a launch costs about a CPU-second). */
let launched: Promise<Browser> | undefined;
test.after.always(async () => (await launched)?.close());

/** A browser context of the test's own (its cookies, storage and permissions), closed with the test. */
async function openBrowser(t: ExecutionContext, viewport: { width: number; height: number }): Promise<BrowserContext> {
  await mkdir(ARTIFACTS, { recursive: true });
  launched ??= chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: [
      '--no-sandbox',
      '--disable-gpu',
      '--disable-background-networking',
      '--disable-component-update',
      '--disable-sync',
      '--disable-quic',
      '--no-first-run',
    ],
  });
  const context = await (await launched).newContext({ viewport });
  t.teardown(() => context.close());
  return context;
}

/** The contexts of one browser share its clipboard: a test copies and reads it back while no other does. */
let clipboardFree: Promise<unknown> = Promise.resolve();
function withClipboard<T>(use: () => Promise<T>): Promise<T> {
  const turn = clipboardFree.then(use);
  clipboardFree = turn.catch(() => undefined);
  return turn;
}

/** A page of the dashboard at `url`, logged in with `token`, and the errors its scripts throw. */
/** Whether every table of the page fits its card: none to scroll sideways for a column or a button. */
const tablesFit = (page: Page) => page.evaluate<boolean>("[...document.querySelectorAll('.table-wrap')].every((wrap) => wrap.scrollWidth <= wrap.clientWidth)");

async function signedIn(t: ExecutionContext, url: string, token: string, viewport: { width: number; height: number }, nowMs?: number) {
  const browser = await openBrowser(t, viewport);
  const page = browser.pages()[0] ?? (await browser.newPage());
  page.setDefaultTimeout(10_000);
  // The page's clock (Date alone: its timers run), for a page that must see the server's day.
  if (nowMs !== undefined) await page.clock.setFixedTime(nowMs);
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  await page.goto(`${url}/dashboard`);
  await page.getByLabel('Admin token').fill(token);
  await page.keyboard.press('Enter');
  return { page, pageErrors };
}

interface Deployment {
  /** Before each screenshot's name: none for the embedded deployment. */
  name: string;
  /** The account the page creates a key for. */
  account: string;
  /** Added to the app's environment; `cleanup` runs after the app has closed. */
  env(): Promise<{ env: Record<string, string>; cleanup(): Promise<void> }>;
}

const embedded: Deployment = { name: '', account: 'acme', env: async () => ({ env: {}, cleanup: async () => undefined }) };

// The limits on Redis are shared by every test file: an account of its own.
const postgresRedis: Deployment = {
  name: 'postgres-redis-',
  account: `acme-${randomBytes(4).toString('hex')}`,
  async env() {
    const database = await throwawayPostgres();
    return { env: { DATABASE_URL: database.url, REDIS_URL }, cleanup: () => database.drop() };
  },
};

/**
 * The reference app on `deployment`, for a server and a page on one fixed clock (`now`, which the
 * page gets from `signedIn`): the calls, files and records of "today" are today's whenever the test
 * runs, a run across midnight UTC included.
 */
async function clockedApp(t: ExecutionContext, deployment: Deployment) {
  const { env, cleanup } = await deployment.env();
  t.teardown(cleanup);
  const now = Date.now();
  const app = await referenceApp(undefined, env, { nowMs: () => now });
  t.teardown(() => app.close());
  return { app, now };
}

// Signing in through an OpenID Provider (oidc-provider, started by the test on a loopback port) as
// a viewer, an operator and an admin, on both deployments: each sees what its role allows (at
// 1280×800, and 390×844 for two pages), the operator edits every field of a key, the admin sees it
// in the audit log, the account's keys and cost, and assigns a role in the page.
const PEOPLE = {
  vera: { email: 'vera@example.com', name: 'Vera Viewer', groups: ['gw-readers'] },
  otto: { email: 'otto@example.com', name: 'Otto Operator', groups: ['gw-ops'] },
  ada: { email: 'ada@example.com', name: 'Ada Admin', groups: ['gw-admins'] },
};

interface SignedOut {
  app: ReferenceApp;
  provider: TestProvider;
  deployment: Deployment;
  browser: BrowserContext;
  page: Page;
  now: number;
  /** A full-page screenshot to test-artifacts/, named for the deployment. */
  shoot(name: string): Promise<void>;
}

/**
 * Part of the dashboard's test, in its browser and on its server once the admin token has logged
 * out: the people of `PEOPLE` sign in through the provider, one after the other.
 */
async function signInByRole(t: ExecutionContext, { app, provider, deployment, browser, page, now, shoot }: SignedOut) {
  const { record: key } = await createApiKey(app.deployment.keys, {
    prefix: app.config.gateway.keyPrefix,
    account: deployment.account,
    name: 'Weekly report',
    scopes: [...SCOPES],
    models: null,
    limits: { costPerDay: 1, costPerMonth: 1.2 },
  });
  // Today's calls: $1.05, 105 % of the day's budget and 87.5 % of the month's.
  await app.deployment.usageStore.insert([
    usageRecord({ time: now, account: deployment.account, keyId: key.id, model: 'echo-1', costPicoUsd: 1_050_000_000_000 }),
  ]);
  // A call under way holds $0.05 of the key's budgets (memory or Redis, as the deployment keeps them).
  await app.deployment.spendLedger.reserve([{ party: `key:${key.id}` }], 50_000_000_000, 600_000);
  // A phone's screen too, where the layout changes most.
  const shootNarrow = async (name: string) => {
    await page.setViewportSize({ width: 390, height: 844 });
    await shoot(`${name}-narrow`);
    await page.setViewportSize({ width: 1280, height: 800 });
  };

  for (const [who, role] of [
    ['vera', 'viewer'],
    ['otto', 'operator'],
    ['ada', 'admin'],
  ] as const) {
    await browser.clearCookies();
    await browser.addCookies([{ name: PERSON_COOKIE, value: who, url: provider.issuer }]);
    await page.goto(`${app.url}/dashboard`);
    if (role === 'viewer') await shoot('sso-login');
    await page.getByRole('link', { name: 'Sign in with Test ID' }).click();
    await page.locator('.who').filter({ hasText: PEOPLE[who].name }).waitFor();
    t.is(await page.locator('.who .badge').textContent(), role);
    const row = page.getByRole('row').filter({ hasText: 'Weekly report' });
    await row.waitFor();
    // What each role may do is offered; what it may not is not (and the API refuses it: test/admin/sso.test.ts).
    t.is(await page.getByRole('button', { name: 'New key' }).count(), role === 'viewer' ? 0 : 1, `${role}: New key`);
    t.is(await row.getByRole('button', { name: /^Revoke / }).count(), role === 'viewer' ? 0 : 1, `${role}: Revoke`);
    t.is(await page.getByRole('link', { name: 'People' }).count(), role === 'admin' ? 1 : 0, `${role}: People`);
    if (role === 'viewer') {
      // Over and near its budgets (until the operator raises them): coloured, and said in words.
      await row.locator('.over').filter({ hasText: 'today $1.05 of $1.00 (105%) over budget' }).waitFor();
      await row.locator('.near').filter({ hasText: 'month $1.05 of $1.20 (88%) near budget' }).waitFor();
      // What the call under way holds, as a share of the day's budget; where each period ends at this rate.
      await row.getByText('$0.05 reserved (5%)').waitFor();
      const forecasts = await row.locator('.forecast').allTextContents();
      t.is(forecasts.length, 2);
      t.regex(forecasts[0] ?? '', /^→ \$[\d,.]+ by the day's end \(\d[\d,]*%\)$/);
      t.regex(forecasts[1] ?? '', /^→ \$[\d,.]+ by the month's end \(\d[\d,]*%\)$/);
      // Spent in part of the day and month what their budgets allow (nearly): on course to pass both.
      t.is(await row.locator('.forecast.over').count(), 2);
    }
    await shoot(`sso-keys-${role}`);
    if (role === 'viewer') await shootNarrow(`sso-keys-${role}`);
    if (role === 'operator') {
      // Every field of the key, edited in a form that opens where it is seen.
      await row.getByRole('button', { name: `Edit ${key.id}` }).click();
      const form = page.getByRole('form', { name: `Edit key ${key.id}` });
      t.true(await form.isVisible(), 'the form is shown');
      t.true((await form.boundingBox())!.y < 800, 'the form opens in view, above the list, whatever its length');
      await form.getByLabel(/^Name/).fill('Weekly report v2');
      await form.getByLabel('Expires (your local time; empty: never)').fill('2099-01-01T00:00');
      await form.getByLabel('Only these:').check();
      await form.getByRole('checkbox', { name: 'echo-1' }).check();
      await form.getByLabel('Requests per minute').fill('30');
      await form.getByLabel('Budget per UTC day (USD)').fill('2');
      await form.getByLabel('Budget per UTC month (USD)').fill('');
      await form.getByLabel(/^Alert at/).fill('90, 75');
      await form.getByLabel('Soft budgets: alert only, never refuse a call').check();
      await shoot('sso-edit-key');
      await form.getByRole('button', { name: 'Save key' }).click();
      await row.getByText('Weekly report v2').waitFor();
      t.like(await app.deployment.keys.get(key.id), {
        name: 'Weekly report v2',
        models: ['echo-1'],
        limits: { requestsPerMinute: 30, costPerDay: 2, costSoft: true, costAlertThresholds: [75, 90] },
      });
      await row.getByText('soft: alerts only').waitFor();
      t.is((await app.deployment.keys.get(key.id))?.limits?.costPerMonth, undefined);
      t.true(((await app.deployment.keys.get(key.id))?.expiresAt ?? 0) > 4_000_000_000);
    }
    // The account's budgets held back: no form to type into until they are loaded, which would overwrite it.
    let releaseLimits = () => {};
    const limitsHeld = new Promise<void>((resolve) => (releaseLimits = resolve));
    await page.route(/\/admin\/v1\/accounts\/[^/]+\/limits$/, async (route) => {
      if (route.request().method() === 'GET') await limitsHeld;
      await route.fallback();
    });
    await page.goto(`${app.url}/dashboard#/accounts/${encodeURIComponent(deployment.account)}`);
    await page.getByRole('region', { name: 'Budgets' }).getByText('Loading the budgets').waitFor();
    t.is(await page.getByRole('button', { name: 'Save budgets' }).count(), 0, `${role}: no budgets form while they load`);
    releaseLimits();
    await page.getByRole('region', { name: 'Budgets' }).getByText('Spent this month (UTC)').waitFor();
    await page.unroute(/\/admin\/v1\/accounts\/[^/]+\/limits$/);
    t.is(await page.getByRole('button', { name: 'Save budgets' }).count(), role === 'viewer' ? 0 : 1, `${role}: Save budgets`);
    if (role === 'operator') {
      // The account's budgets made soft, alerting at thresholds of their own.
      const budgets = page.getByRole('region', { name: 'Budgets' });
      await budgets.getByLabel('Budget per UTC month (USD)').fill('3');
      await budgets.getByLabel(/^Alert at/).fill('90, 50');
      await budgets.getByLabel('Soft budgets: alert only, never refuse a call').check();
      await budgets.getByRole('button', { name: 'Save budgets' }).click();
      await budgets.getByText('Soft budgets: they alert, and refuse no call. Alerts at 50%, 90%.').waitFor();
      t.like(await app.deployment.accountBudgets.get(deployment.account), { costPerMonth: 3, costSoft: true, costAlertThresholds: [50, 90] });
      await budgets.locator('.forecast').filter({ hasText: "by the month's end" }).waitFor();
      await shoot('sso-account-budgets');
    }
    if (role === 'admin') {
      // The account's keys on its page, its cost on the accounts' list.
      await page.getByRole('region', { name: 'Keys of this account' }).getByText('Weekly report v2').waitFor();
      t.is(await page.getByRole('row').filter({ hasText: deployment.account }).first().getByText('$1.05').count(), 1, 'the cost column');
      await shoot('sso-account');
      // The operator's edit in the audit log, by the operator, with the values before and after.
      await page.getByRole('link', { name: 'Audit log' }).click();
      const edit = page.getByRole('row').filter({ hasText: 'Key changed' }).first();
      await edit.getByText('otto@example.com').waitFor();
      t.regex((await edit.textContent()) ?? '', /name: Weekly report → Weekly report v2/);
      await shoot('sso-audit');
      // The people who signed in, and a role assigned in the page.
      await page.getByRole('link', { name: 'People' }).click();
      // The People page's own control: the audit log's rows name her too until the page has changed.
      await page.getByLabel('Role of vera@example.com').waitFor();
      t.is(await page.getByRole('row').count(), 4);
      await page.getByLabel('Role of vera@example.com').selectOption('operator');
      await until(
        async () => (await app.deployment.adminUsers.list()).find((user) => user.email === 'vera@example.com')?.role,
        (assigned) => assigned === 'operator',
      );
      t.is((await app.deployment.adminUsers.list()).find((user) => user.email === 'vera@example.com')?.role, 'operator');
      await shoot('sso-people');
      await shootNarrow('sso-people');
    }
    // Signed out here, then at the provider, and back to the dashboard's login.
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByRole('button', { name: 'Yes, sign me out' }).click();
    await page.getByRole('link', { name: 'Sign in with Test ID' }).waitFor();
  }
}

const dashboardTest = (deployment: Deployment) => async (t: ExecutionContext) => {
  const { env, cleanup } = await deployment.env();
  t.teardown(cleanup);
  const now = Date.now();
  // The server with a provider to sign people in through, at the end.
  const { app, provider } = await ssoReferenceApp(PEOPLE, env, (close) => t.teardown(close), { nowMs: () => now });
  const acme = deployment.account;
  const { token } = await createAdminToken(app.deployment.adminTokens, { prefix: app.config.gateway.keyPrefix, name: 'ops console' });
  const browser = await openBrowser(t, { width: 1280, height: 800 });
  await browser.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: app.url });
  const page = browser.pages()[0] ?? (await browser.newPage());
  page.setDefaultTimeout(10_000);
  await page.clock.setFixedTime(now);
  const scripts: string[] = [];
  page.on('dialog', (dialog) => {
    scripts.push(dialog.message());
    void dialog.dismiss();
  });
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));
  // Every request the page makes works: none answers with a server error.
  const serverErrors: string[] = [];
  page.on('response', (response) => {
    if (response.status() >= 500) serverErrors.push(`${response.status()} ${response.request().method()} ${response.url()}`);
  });
  const shoot = async (name: string) => {
    await page.mouse.move(0, 0); // no hover state in the picture
    await page.screenshot({ path: join(ARTIFACTS, `dashboard-${deployment.name}${name}.png`), fullPage: true });
  };

  // Log in, with the keyboard alone.
  await page.goto(`${app.url}/dashboard`);
  await page.getByLabel('Admin token').focus();
  await shoot('login');
  await page.keyboard.type('kmg_admin_wrong');
  await page.keyboard.press('Enter');
  await page.getByRole('alert').filter({ hasText: 'That admin token was not accepted.' }).waitFor();
  await page.getByLabel('Admin token').fill(token);
  await page.keyboard.press('Enter');
  await page.getByText('No keys yet. Create one with New key.').waitFor();
  t.is(await page.locator('.who').textContent(), 'Signed in as ops console', 'the header names the admin token');
  t.false(await page.evaluate<boolean>("document.cookie.includes('kmg_admin_session')"), 'the session cookie is HttpOnly');
  t.is(await page.evaluate<number>('localStorage.length + sessionStorage.length'), 0, 'nothing in web storage');

  // Create a key in the page: its secret is shown once, with a copy button.
  await page.getByRole('button', { name: 'New key' }).click();
  await page.getByLabel('Account').last().fill(acme);
  await page.getByLabel(/^Name/).fill('Nightly batch');
  await page.getByLabel('Requests per minute').fill('120');
  await shoot('new-key');
  // No key has this account yet: the form asks before it starts one (a typo would otherwise).
  await page.getByRole('button', { name: 'Create key' }).click();
  await page
    .getByRole('alert')
    .filter({ hasText: `${acme} is a new account: create it?` })
    .waitFor();
  t.is(await page.getByLabel('Secret key').count(), 0, 'no key before the new account is accepted');
  t.deepEqual(await app.deployment.keys.list(), []);
  await page.getByRole('button', { name: 'Create the account and its key' }).click();
  const secret = page.getByLabel('Secret key');
  const key = await secret.inputValue();
  t.regex(key, /^kmg_sk_[A-Za-z0-9_-]{43}$/);
  const copied = await withClipboard(async () => {
    await page.getByRole('button', { name: 'Copy' }).click();
    await page.getByText('Copied to the clipboard.').waitFor();
    return page.evaluate<string>('navigator.clipboard.readText()');
  });
  t.is(copied, key);
  await shoot('key-created');
  await page.keyboard.press('Escape');
  await secret.waitFor({ state: 'detached' });
  t.false((await page.content()).includes(key), 'once closed, the secret is nowhere in the page');

  // The key works from the openai SDK, and a stored string is shown as text, never as markup.
  const openai = new OpenAI({ apiKey: key, baseURL: `${app.url}/v1`, maxRetries: 0 });
  t.deepEqual(
    (await openai.models.list()).data.map((model) => model.id),
    ['echo-1', 'echo-2', 'echo-embed-1'],
  );
  await openai.files.create({ file: await toFile(makePdf(2), 'report.pdf', { type: 'application/pdf' }), purpose: 'user_data' });
  const completion = await openai.chat.completions.create({ model: 'echo-1', messages: [{ role: 'user', content: 'Count these five words' }] });
  await openai.chat.completions.create({ model: 'echo-2', messages: [{ role: 'user', content: 'And these three' }] });
  const created = await fetch(`${app.url}/admin/v1/keys`, {
    method: 'POST',
    headers: { authorization: `Bearer ${token}` },
    body: JSON.stringify({ account: HOSTILE, scopes: ['models:read'], models: ['echo-1'] }),
  });
  t.is(created.status, 201);
  const hostile = (await created.json()) as { id: string; key: string };
  const refused = await new OpenAI({ apiKey: hostile.key, baseURL: `${app.url}/v1`, maxRetries: 0 }).chat.completions
    .create({ model: 'echo-1', messages: [{ role: 'user', content: 'no chat:completions scope' }] })
    .catch((err: unknown) => err);
  t.like(refused, { status: 403 }, 'refused, and metered all the same');
  await page.getByRole('button', { name: 'Show keys' }).click();
  await page.getByRole('link', { name: HOSTILE }).waitFor();
  await shoot('keys');

  // Find the named key by the start of its name: its hint and its last use show, never more of the secret.
  await app.deployment.keyUses.flush();
  await page.getByLabel('Find').fill('nightly');
  await page.getByRole('button', { name: 'Show keys' }).click();
  await page.getByRole('link', { name: HOSTILE }).waitFor({ state: 'detached' });
  const named = page.getByRole('row').filter({ hasText: 'Nightly batch' });
  await named.getByText(`kmg_sk_…${key.slice(-4)}`).waitFor();
  t.not(await named.locator('td.time').last().textContent(), 'never', 'its last use shows');
  t.false((await page.content()).includes(key.slice(-5)));
  await shoot('keys-found');
  await page.getByLabel('Find').fill(HOSTILE.slice(0, 4));
  await page.getByRole('button', { name: 'Show keys' }).click();
  await page.getByRole('link', { name: HOSTILE }).waitFor();
  t.is(await page.getByRole('row').filter({ hasText: 'Nightly batch' }).count(), 0);
  await page.getByLabel('Find').fill('');
  await page.getByRole('button', { name: 'Show keys' }).click();
  await page.getByRole('row').filter({ hasText: 'Nightly batch' }).waitFor();

  // Revoke in the page; the next call with the key is refused within a second.
  const row = page.getByRole('row').filter({ hasText: acme });
  await row.getByRole('button', { name: /^Revoke / }).click();
  await page.getByRole('dialog', { name: 'Revoke this key?' }).getByRole('button', { name: 'Revoke key' }).click();
  await row.getByText('revoked').waitFor();
  const revokedAt = performance.now();
  const refusedInTime = await until(
    () =>
      openai.models.list().then(
        () => false,
        (err: unknown) => err instanceof AuthenticationError,
      ),
    (done) => done || performance.now() - revokedAt > 1000,
  );
  if (!refusedInTime) return t.fail('the key was still accepted a second after it was revoked in the page');

  // Rotate the other key in the page: a new secret, once.
  await page
    .getByRole('row')
    .filter({ hasText: HOSTILE })
    .getByRole('button', { name: /^Rotate / })
    .click();
  const rotation = page.getByRole('dialog', { name: 'Rotate this key' });
  await rotation.getByLabel('Grace period').selectOption('3600');
  await rotation.getByRole('button', { name: 'Rotate key' }).click();
  t.regex(await page.getByLabel('Secret key').inputValue(), /^kmg_sk_/);
  await page.getByRole('button', { name: 'Done' }).click();
  // The rotated key shows which key replaced it; the link finds the replacement, which shows what it replaced.
  const replaced = page.getByRole('row').filter({ hasText: HOSTILE }).filter({ hasText: 'replaced by' });
  const replacementId = (await replaced.locator('.rotation code').textContent()) as string;
  t.regex(replacementId, /^key_/);
  // In its grace the replaced key still works: it may be revoked, but not rotated again (the API refuses: rotate its replacement).
  t.is(await replaced.getByRole('button', { name: /^Revoke / }).count(), 1);
  t.is(await replaced.getByRole('button', { name: /^Rotate / }).count(), 0);
  t.true(await tablesFit(page), 'the key list fits a 1280-pixel window, its buttons in reach');
  await shoot('keys-rotated');
  await replaced.getByRole('button', { name: /^replaced by / }).click();
  await page.getByRole('row').filter({ hasText: 'replaces' }).getByText(replacementId).first().waitFor();
  t.is(await page.getByLabel('Find').inputValue(), replacementId);
  t.is(await page.locator('tbody tr').count(), 1);
  // The replacement revoked: no key of the line can be rotated any more, and none offers it.
  const replacement = page.getByRole('row').filter({ hasText: 'replaces' });
  await replacement.getByRole('button', { name: /^Revoke / }).click();
  await page.getByRole('dialog', { name: 'Revoke this key?' }).getByRole('button', { name: 'Revoke key' }).click();
  await replacement.getByText('revoked').waitFor();
  await page.getByLabel('Find').fill('');
  await page.getByRole('button', { name: 'Show keys' }).click();
  await page.getByRole('row').filter({ hasText: 'Nightly batch' }).waitFor();
  t.is(await replaced.getByRole('button', { name: /^Revoke / }).count(), 1);
  t.is(await replaced.getByRole('button', { name: /^Rotate / }).count(), 0, 'no Rotate on a key whose replacement was revoked');

  // The account's figures against its limits.
  await page.getByRole('link', { name: acme }).first().click();
  await page.getByRole('heading', { name: `Account ${acme}` }).waitFor();
  t.is(await page.getByLabel('Files kept').getAttribute('value'), '1');
  t.is(await page.getByLabel('Files created today (UTC)').getAttribute('value'), '1');
  await shoot('account');
  // Every account with a key in one list: acme's key revoked (none active), its file kept.
  const accounts = page.getByRole('table', { name: 'Every account with a key' });
  const acmeRow = accounts.getByRole('row').filter({ has: page.getByRole('rowheader', { name: acme, exact: true }) });
  t.deepEqual((await acmeRow.getByRole('cell').allTextContents()).slice(0, 2), ['0', '1'], 'active keys, files');
  await accounts.getByRole('link', { name: HOSTILE, exact: true }).click();
  await page.getByRole('heading', { name: `Account ${HOSTILE}` }).waitFor();
  t.is(await page.locator('main img').count(), 0);

  // Usage: the calls made above, beside records of the days before, as the metering writes them.
  const { usageRecorder: usage, usageStore } = app.deployment;
  await until(
    async () => {
      await usage.flush();
      return usageStore.list({ account: acme });
    },
    (records) => records.length >= 2,
  );
  const [keyId] = new Set((await usageStore.list({ account: acme })).map((record) => record.keyId));
  const today = new Date(now).toISOString().slice(0, 10);
  await usageStore.insert(
    [6, 5, 5, 3, 2, 2, 2, 1].map((daysAgo, i) =>
      usageRecord({
        time: now - daysAgo * DAY_MS,
        account: acme,
        keyId: keyId as string,
        model: i % 3 === 0 ? 'echo-2' : 'echo-1',
        inputTokens: 40 + 17 * i,
        outputTokens: 25 + 9 * i,
      }),
    ),
  );
  // And an MCP tool call of the account, as mcpGateway() records one.
  await app.deployment.mcpCalls.insert([
    {
      time: now,
      requestId: 'req_mcp',
      keyId: keyId as string,
      account: acme,
      server: 'github',
      tool: 'search_issues',
      outcome: 'ok',
      durationMs: 42,
      requestBytes: 12,
      responseBytes: 345,
    },
  ]);
  await page.goto(`${app.url}/dashboard#/accounts/${acme}`);
  await page.getByRole('link', { name: 'Model calls of this account: requests and tokens per day' }).click();
  const figures = page.getByRole('table', { name: `Requests and tokens of account ${acme} per day and model, the last 7 days` });
  await figures.waitFor();
  t.is(await page.getByRole('img', { name: /stacked bar chart/ }).count(), 4, 'four charts: requests by model, answered and refused, tokens and cost');
  const todayEcho1 = figures
    .getByRole('row')
    .filter({ has: page.getByRole('rowheader', { name: today }) })
    .filter({ hasText: 'echo-1' });
  t.deepEqual(await todayEcho1.getByRole('cell').allTextContents(), [
    'echo-1',
    '1',
    '1',
    '0',
    String(completion.usage?.prompt_tokens),
    String(completion.usage?.completion_tokens),
    '$0.00',
    '0',
    '$0.00',
  ]);
  t.is(await figures.locator('tfoot td').first().textContent(), '10', 'requests: 2 calls today and 8 before');
  const toolCalls = page.getByRole('region', { name: 'MCP tool calls' }).getByRole('row').filter({ hasText: 'github/search_issues' });
  await toolCalls.waitFor();
  t.deepEqual(await toolCalls.getByRole('cell').allTextContents(), ['github/search_issues', '1', '0', '42 ms', '12 / 345']);
  await shoot('usage');
  await page.getByLabel('Split by').selectOption('key');
  await page
    .getByRole('table', { name: /per day and key/ })
    .getByText(keyId as string)
    .first()
    .waitFor();
  await page
    .getByRole('table', { name: /per day and key/ })
    .getByRole('cell', { name: `Nightly batch ${keyId}` })
    .first()
    .waitFor();
  await shoot('usage-by-key');
  await page.getByLabel('Period').selectOption('30');
  await page.getByRole('table', { name: /the last 30 days/ }).waitFor();
  // Another account keeps the period and the split chosen.
  await page.goto(`${app.url}/dashboard#/usage/${encodeURIComponent(HOSTILE)}`);
  await page.getByRole('heading', { name: `Account ${HOSTILE}, the last 30 days` }).waitFor();
  await page.getByLabel('Split by').selectOption('model');
  // The call refused for its scope: refused, in the row that says why it has no model.
  const noModel = page.getByRole('row').filter({ has: page.getByRole('cell', { name: '(refused before a model was chosen)' }) });
  await noModel.waitFor();
  t.deepEqual((await noModel.getByRole('cell').allTextContents()).slice(1, 4), ['1', '0', '1'], 'requests, answered, refused');
  t.is(await page.locator('main img').count(), 0);
  await page.getByRole('combobox', { name: 'Account' }).fill('nobody-yet');
  await page.keyboard.press('Enter');
  await page.getByText('No model calls by nobody-yet in the last 30 days.').waitFor();

  // The audit log: the page's own changes, made by the token it logged in with; stored strings as text.
  await page.getByRole('link', { name: 'Audit log' }).click();
  const log = page.getByRole('table', { name: 'Admin actions, newest first' });
  await log.getByRole('row').filter({ hasText: 'Key revoked' }).filter({ hasText: acme }).waitFor();
  await log.getByRole('row').filter({ hasText: 'Key rotated' }).filter({ hasText: HOSTILE }).waitFor();
  t.is(await log.getByRole('row').filter({ hasText: 'Dashboard log-in' }).count(), 1, 'the refused log-in is no action');
  await page.getByLabel('Action').selectOption('key.created');
  await page.getByRole('button', { name: 'Filter' }).click();
  const createdRows = await until(
    async () => log.getByRole('row').filter({ hasText: 'Key' }).allTextContents(),
    (rows) => rows.length === 2 && rows.every((row) => row.includes('Key created')),
  );
  t.is(createdRows.length, 2, 'the two keys created, once each, and nothing else');
  await shoot('audit');
  t.false((await page.content()).includes(token), 'no admin token in the audit log');
  t.is(await page.locator('main img').count(), 0);

  // The request log: the calls made above, newest first, the refused one among them; filtered by status.
  await page.getByRole('link', { name: 'Requests' }).click();
  const calls = page.getByRole('table', { name: 'Model calls, newest first' });
  await calls.getByRole('row').filter({ hasText: '403' }).first().waitFor();
  await page.getByLabel('Status').fill('403');
  await page.getByRole('button', { name: 'Filter' }).click();
  const refusedRows = await until(
    async () =>
      calls
        .getByRole('row')
        .filter({ has: page.getByRole('cell') })
        .allTextContents(),
    (rows) => rows.length > 0 && rows.every((row) => row.includes('403')),
  );
  t.true(refusedRows.length > 0 && refusedRows.every((row) => row.includes('403')), 'only the calls refused with 403');
  await shoot('requests');
  t.false((await page.content()).includes(token), 'no admin token in the request log');

  // Log out: the session is over on the server too.
  await page.getByRole('button', { name: 'Log out' }).click();
  await page.getByLabel('Admin token').waitFor();
  await page.reload();
  await page.getByLabel('Admin token').waitFor();
  t.deepEqual(scripts, [], 'no stored string ran as a script');

  await signInByRole(t, { app, provider, deployment, browser, page, now, shoot });
  t.deepEqual(pageErrors, []);
  t.deepEqual(serverErrors, []);
};

withChromium(test)(
  'the dashboard: log in, create a key, use it, revoke it in the page, the next call is refused, and its usage and the request log are shown; then a viewer, an operator and an admin sign in through an OIDC provider',
  dashboardTest(embedded),
);
withRedis(withPostgres(withChromium(test)))(
  'the dashboard on PostgreSQL and Redis: log in, create a key, use it, revoke it in the page, the next call is refused, and its usage and the request log are shown; then a viewer, an operator and an admin sign in through an OIDC provider',
  dashboardTest(postgresRedis),
);

// Money in the dashboard: the server and the page on one fixed clock, so that "today" is the
// day of the usage records whenever the test runs, a run across midnight UTC included.
const startOfUtcDay = (ms: number) => new Date(ms).setUTCHours(0, 0, 0, 0);

withChromium(test)(
  "the dashboard shows cost per day beside tokens and spend against budgets per key and per account, and sets a key's and an account's budgets",
  async (t) => {
    const { app, now } = await clockedApp(t, embedded);
    const { token } = await createAdminToken(app.deployment.adminTokens, { prefix: app.config.gateway.keyPrefix });
    const { record: key } = await createApiKey(app.deployment.keys, {
      prefix: app.config.gateway.keyPrefix,
      account: 'acme',
      scopes: [...SCOPES],
      limits: { costPerDay: 5, costPerMonth: 50 },
    });
    // Calls at the start of the clock's UTC day, so that they are its month's and its day's: 1.25 + 0.5 USD.
    const morning = startOfUtcDay(now);
    await app.deployment.usageStore.insert([
      usageRecord({ time: morning, account: 'acme', keyId: key.id, model: 'echo-1', costPicoUsd: 1_250_000_000_000 }),
      usageRecord({ time: morning + 1, account: 'acme', keyId: key.id, model: 'echo-2', costPicoUsd: 500_000_000_000 }),
    ]);

    const { page, pageErrors } = await signedIn(t, app.url, token, { width: 1280, height: 900 }, now);

    // The key list: the key's spend today and this month against its budgets.
    const row = page.getByRole('row').filter({ hasText: key.id });
    await row.getByText('today $1.75 of $5.00 (35%)').waitFor();
    await row.getByText('month $1.75 of $50.00 (4%)').waitFor();
    t.truthy(await row.getByText('$5.00/day, $50.00/month').count());
    t.true(await tablesFit(page), 'the key list fits a 1280-pixel window, its buttons in reach');
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-cost-keys.png'), fullPage: true });

    // The key form takes budgets in USD, decimals included.
    await page.getByRole('button', { name: 'New key' }).click();
    await page.getByLabel('Account').last().fill('globex');
    await page.getByLabel('Budget per UTC day (USD)').fill('2.5');
    await page.getByRole('button', { name: 'Create key' }).click();
    // globex has no key yet: the form asks before it starts a new account.
    await page.getByRole('button', { name: 'Create the account and its key' }).click();
    await page.getByLabel('Secret key').waitFor();
    await page.keyboard.press('Escape');
    t.like((await app.deployment.keys.list({ account: 'globex' }))[0]?.limits, { costPerDay: 2.5 });

    // The usage page: a cost chart beside the tokens', the total, and each row's cost.
    await page.goto(`${app.url}/dashboard#/usage/acme`);
    await page.getByRole('img', { name: /^Cost per day \(USD\), by model: a stacked bar chart/ }).waitFor();
    t.is(await page.getByRole('img', { name: /^Tokens per day/ }).count(), 1);
    t.is(await page.getByRole('definition').filter({ hasText: '$1.75' }).count(), 1, 'the total cost');
    const figures = page.getByRole('table', { name: /and their cost/ });
    // The cost, then the cache's hits and savings.
    t.deepEqual((await figures.getByRole('row').filter({ hasText: 'echo-1' }).getByRole('cell').allTextContents()).slice(-3), ['$1.25', '0', '$0.00']);
    t.deepEqual((await figures.locator('tfoot td').allTextContents()).slice(-3), ['$1.75', '0', '$0.00']);
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-cost-usage.png'), fullPage: true });

    // The account view: no budget yet; set one, and see the spend against it.
    await page.goto(`${app.url}/dashboard#/accounts/acme`);
    const budgets = page.getByRole('region', { name: 'Budgets' });
    await budgets.getByText('$1.75 (no budget)').first().waitFor();
    await budgets.getByLabel('Budget per UTC month (USD)').fill('7');
    await budgets.getByRole('button', { name: 'Save budgets' }).click();
    await budgets.getByText('$1.75 of $7.00 (25%)').waitFor();
    t.is(await budgets.getByRole('meter').count(), 1);
    t.deepEqual(await app.deployment.accountBudgets.get('acme'), { costPerMonth: 7 });
    // 0 passes the field's own check; the server refuses it (a budget is positive).
    await budgets.getByLabel('Budget per UTC day (USD)').fill('0');
    await budgets.getByRole('button', { name: 'Save budgets' }).click();
    await budgets.getByRole('alert').waitFor();
    t.deepEqual(await app.deployment.accountBudgets.get('acme'), { costPerMonth: 7 }, 'a refused change changes nothing');
    await page.screenshot({ path: join(ARTIFACTS, 'dashboard-cost-account.png'), fullPage: true });
    t.deepEqual(pageErrors, []);
  },
);

// Names as the admin API allows them, in the page's addresses and tables, on both deployments.
const namesTest = (deployment: Deployment) => async (t: ExecutionContext) => {
  const { app, now } = await clockedApp(t, deployment);
  const prefix = app.config.gateway.keyPrefix;
  const { token } = await createAdminToken(app.deployment.adminTokens, { prefix });
  // A / in an account name is a character of the name in every path the page makes.
  const ACCOUNT = 'ops/eu.west';
  const night = await createApiKey(app.deployment.keys, { prefix, account: ACCOUNT, name: 'Night run', scopes: [...SCOPES] });
  await createApiKey(app.deployment.keys, { prefix, account: 'x'.repeat(255), scopes: [...SCOPES] });
  await app.deployment.usageStore.insert([
    usageRecord({ time: startOfUtcDay(now), account: ACCOUNT, keyId: night.record.id, model: 'echo-1', costPicoUsd: 1_250_000_000_000 }),
  ]);

  const { page, pageErrors } = await signedIn(t, app.url, token, { width: 1280, height: 800 }, now);

  // An account of 255 characters without a space wraps in its cell: the page is no wider than the window.
  await page.getByRole('row').filter({ hasText: 'Night run' }).getByText('today $1.25').waitFor();
  t.true(await page.evaluate<boolean>('document.documentElement.scrollWidth <= innerWidth'), 'no horizontal scrolling');
  await page.screenshot({ path: join(ARTIFACTS, `dashboard-${deployment.name}long-names.png`), fullPage: true });

  // A key found by its name or its id shows its spend, whatever the text found by.
  const find = async (text: string) => {
    await page.getByLabel('Find').fill(text);
    await page.getByRole('button', { name: 'Show keys' }).click();
  };
  for (const text of ['night', night.record.id]) {
    await find('nobody');
    await page.getByText("No key's account, id or name starts with").waitFor();
    await find(text);
    await page.getByRole('row').filter({ hasText: 'Night run' }).getByText('today $1.25').waitFor();
  }

  // The account's page, its spend and its budgets.
  await page.goto(`${app.url}/dashboard#/accounts/${encodeURIComponent(ACCOUNT)}`);
  await page.getByRole('heading', { name: `Account ${ACCOUNT}` }).waitFor();
  const budgets = page.getByRole('region', { name: 'Budgets' });
  await budgets.getByText('$1.25 (no budget)').first().waitFor();
  await budgets.getByLabel('Budget per UTC day (USD)').fill('5');
  await budgets.getByRole('button', { name: 'Save budgets' }).click();
  await budgets.getByText('$1.25 of $5.00 (25%)').waitFor();
  t.deepEqual(await app.deployment.accountBudgets.get(ACCOUNT), { costPerDay: 5 });

  // The key form takes names as long as the API does, counted in characters: 255 astral ones are 510 UTF-16 units.
  const astral = '\u{1D518}'.repeat(255);
  await page.goto(`${app.url}/dashboard`);
  await page.getByRole('button', { name: 'New key' }).click();
  await page.getByLabel('Account').last().fill(astral);
  await page.getByLabel(/^Name/).fill('\u{1F680}'.repeat(100));
  await page.getByRole('button', { name: 'Create key' }).click();
  await page.getByRole('button', { name: 'Create the account and its key' }).click();
  await page.getByLabel('Secret key').waitFor();
  await page.keyboard.press('Escape');
  t.like((await app.deployment.keys.list({ account: astral }))[0], { account: astral, name: '\u{1F680}'.repeat(100) });

  // An address typed by hand with a bare % is the account it reads as, not a blank page.
  await page.goto(`${app.url}/dashboard#/accounts/50%`);
  await page.getByRole('heading', { name: 'Account 50%' }).waitFor();
  t.deepEqual(pageErrors, []);
};

withChromium(test)(
  'the dashboard takes names as the API allows them: a found key shows its spend, a / in an account, a bare % in the address, a name of 255 characters',
  namesTest(embedded),
);
withRedis(withPostgres(withChromium(test)))(
  'the dashboard on PostgreSQL and Redis takes names as the API allows them: a found key shows its spend, a / in an account, a bare % in the address, a name of 255 characters',
  namesTest(postgresRedis),
);

// The dashboard's files as the reference server serves them.
async function serve(dir: string) {
  const app = new Koa();
  app.use(openAIErrors());
  app.use(dashboardRouter(pino({ level: 'silent' }), dir).routes());
  return listen(app);
}

test('the page is served with a CSP that admits only its own files, its hashed assets cached for good, nothing else', async (t) => {
  const dir = await mkdtemp(join(tmpdir(), 'kmg-dashboard-'));
  t.teardown(() => rm(dir, { recursive: true, force: true }));
  await mkdir(join(dir, 'assets'));
  await writeFile(join(dir, 'index.html'), '<!doctype html><script type="module" src="/dashboard/assets/index-abc.js"></script>');
  await writeFile(join(dir, 'assets', 'index-abc.js'), 'console.log(1)');
  const server = await serve(dir);
  t.teardown(() => server.close());

  const page = await fetch(`${server.url}/dashboard`);
  t.is(page.status, 200);
  t.is(page.headers.get('content-type'), 'text/html; charset=utf-8');
  const csp = page.headers.get('content-security-policy') ?? '';
  t.regex(csp, /default-src 'none'/);
  t.regex(csp, /script-src 'self'(;|$)/);
  t.notRegex(csp, /unsafe-inline|unsafe-eval/);
  t.regex(await page.text(), /index-abc\.js/);
  const script = await fetch(`${server.url}/dashboard/assets/index-abc.js`);
  t.is(script.headers.get('cache-control'), 'public, max-age=31536000, immutable');
  t.regex(script.headers.get('content-type') ?? '', /javascript/);
  for (const path of ['/dashboard/assets/other.js', '/dashboard/assets/..%2Findex.html', '/dashboard/index.html']) {
    t.is((await fetch(`${server.url}${path}`)).status, 404, path);
  }
});

test('without a build, /dashboard says how to make one', async (t) => {
  const server = await serve(join(tmpdir(), 'kmg-no-such-build'));
  t.teardown(() => server.close());
  const page = await fetch(`${server.url}/dashboard`);
  t.is(page.status, 503);
  t.regex(await page.text(), /npm run build:dashboard/);
});
