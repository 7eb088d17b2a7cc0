import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import test from 'ava';
import { chromium } from 'playwright-core';
import { createAdminToken } from '../../lib/admin/admin-tokens.js';
import { createApiKey } from '../../lib/auth/keys.js';
import { SCOPES } from '../../lib/auth/scopes.js';
import { ROOT } from '../helpers/server-process.js';
import { CHROMIUM, withChromium } from '../helpers/services.js';
import { usageRecord } from '../../lib/testing/usage-store-contract.js';
import { referenceApp } from '../spec/reference-app.js';

// Money in the dashboard, in Debian's Chromium, against the reference server's own app: the cost
// chart and figures on the usage page, each key's spend against its budget on the key list, and an
// account's budgets set and shown against its spend on the account view. Apart from
// dashboard.test.ts, which runs on more deployments. Screenshots go to test-artifacts/.

const ARTIFACTS = join(ROOT, 'test-artifacts');
const HOUR_MS = 3_600_000;

withChromium(test)('the dashboard shows cost per day beside tokens and spend against budgets per key and per account, and sets a key\'s and an account\'s budgets', async (t) => {
  const app = await referenceApp();
  t.teardown(() => app.close());
  const { token } = await createAdminToken(app.deployment.adminTokens, { prefix: app.config.gateway.keyPrefix });
  const { record: key } = await createApiKey(app.deployment.keys, {
    prefix: app.config.gateway.keyPrefix,
    account: 'acme',
    scopes: [...SCOPES],
    limits: { costPerDay: 5, costPerMonth: 50 },
  });
  // Calls of this morning (UTC, so that they are this month's and today's whenever the test runs): 1.25 + 0.5 USD.
  const morning = new Date().setUTCHours(0, 0, 0, 0) + HOUR_MS / 60;
  await app.deployment.usageStore.insert([
    usageRecord({ time: morning, account: 'acme', keyId: key.id, model: 'echo-1', costPicoUsd: 1_250_000_000_000 }),
    usageRecord({ time: morning + 1, account: 'acme', keyId: key.id, model: 'echo-2', costPicoUsd: 500_000_000_000 }),
  ]);

  const profile = await mkdtemp(join(tmpdir(), 'kmg-chromium-'));
  t.teardown(() => rm(profile, { recursive: true, force: true }));
  await mkdir(ARTIFACTS, { recursive: true });
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--disable-component-update', '--disable-sync', '--no-first-run'],
    viewport: { width: 1280, height: 900 },
  });
  t.teardown(() => browser.close());
  const page = browser.pages()[0] ?? (await browser.newPage());
  page.setDefaultTimeout(10_000);
  const pageErrors: string[] = [];
  page.on('pageerror', (err) => pageErrors.push(err.message));

  await page.goto(`${app.url}/dashboard`);
  await page.getByLabel('Admin token').fill(token);
  await page.keyboard.press('Enter');

  // The key list: the key's spend today and this month against its budgets.
  const row = page.getByRole('row').filter({ hasText: key.id });
  await row.getByText('today $1.75 of $5.00 (35%)').waitFor();
  await row.getByText('month $1.75 of $50.00 (4%)').waitFor();
  t.truthy(await row.getByText('$5.00/day, $50.00/month').count());
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
  t.deepEqual((await figures.getByRole('row').filter({ hasText: 'echo-1' }).getByRole('cell').allTextContents()).at(-1), '$1.25');
  t.is(await figures.locator('tfoot td').last().textContent(), '$1.75');
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
});
