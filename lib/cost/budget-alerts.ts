import { createHmac } from 'node:crypto';
import { z } from 'zod';
import { parseOptions, positiveInteger, timerMs } from '../settings/schemas.js';

/**
 * What a webhook receives when a budget's spend crosses one of its alert thresholds: the budget's
 * party (`scope` and `id`: a key's id, the first of its line of rotations, or an account's name),
 * the threshold in percent of the budget, the spend and the budget in USD, and the period
 * (`day`: the UTC day, `month`: the UTC calendar month).
 */
export interface BudgetAlert {
  type: 'budget.threshold';
  scope: 'key' | 'account';
  id: string;
  threshold: number;
  spent_usd: number;
  budget_usd: number;
  period: 'day' | 'month';
}

/** Where "once per threshold per period" is decided: the first `claim` of a name wins, until `expiresAt` (Unix ms). */
export interface AlertClaims {
  /** True for the first claim of `name` until `expiresAt`, false for every other, across the processes sharing it. */
  claim(name: string, expiresAt: number): Promise<boolean>;
}

/** A webhook: its URL, and the body it takes: `generic` (a `BudgetAlert`) or `slack` (`{ text }`, as Slack's incoming webhooks take it). */
export interface AlertWebhook {
  url: string;
  format?: 'generic' | 'slack';
}

/** Options of `webhookNotifier()`. */
export interface WebhookNotifierOptions {
  webhooks: readonly AlertWebhook[];
  /** The key of the `x-kmg-signature: sha256=<hex HMAC-SHA256 of the raw body>` header. Default: none (no header). */
  secret?: string | undefined;
  /** Tries per alert and webhook. Default 5. */
  attempts?: number;
  /** The wait before the second try, in ms, doubled at each next, at most 60 s. Default 1000. */
  backoffMs?: number;
  /** How long one try may take, in ms. Default 5000. */
  timeoutMs?: number;
  /** Alerts waiting to be sent at most: one more is dropped (and reported). Default 1000. */
  maxQueued?: number;
  /** Called once per alert and webhook when it was delivered (2xx), or given up (`error` set). Default: nothing. */
  onOutcome?: (outcome: { alert: BudgetAlert; url: string; attempts: number; error?: Error }) => void;
  /** The `fetch` to send with, and the `sleep` to wait with: for tests. Default: the global `fetch`, a timer. */
  fetch?: typeof fetch;
  sleep?: (ms: number) => Promise<void>;
}

const notifierOptions = z.object({
  attempts: positiveInteger.max(20).default(5),
  backoffMs: timerMs.default(1000),
  timeoutMs: timerMs.default(5000),
  maxQueued: positiveInteger.default(1000),
});

const MAX_BACKOFF_MS = 60_000;

/** The Slack-compatible body of an alert. */
function slackBody(alert: BudgetAlert): { text: string } {
  return {
    text: `Budget alert: the ${alert.scope} ${alert.id} has spent ${alert.spent_usd} USD of its ${alert.period === 'day' ? 'daily' : 'monthly'} budget of ${alert.budget_usd} USD (${alert.threshold} % reached)`,
  };
}

/**
 * Sends each alert to every webhook, off the request path: `notify` queues and returns at once. Each
 * body is signed (`x-kmg-signature: sha256=<hex HMAC-SHA256 of the raw body>`, keyed by `secret`),
 * each try bounded by `timeoutMs`, a failed one (no answer, or not 2xx) tried again after
 * `backoffMs`, doubled each time, `attempts` times in all.
 * @example const notify = webhookNotifier({ webhooks: [{ url: process.env.ALERT_WEBHOOK_URL }], secret: process.env.ALERT_WEBHOOK_SECRET })
 */
export function webhookNotifier(options: WebhookNotifierOptions): (alert: BudgetAlert) => void {
  const { webhooks, secret, onOutcome, fetch: send = fetch, sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms).unref()) } = options;
  const { attempts, backoffMs, timeoutMs, maxQueued } = parseOptions(notifierOptions, options, 'webhookNotifier()');
  for (const { url } of webhooks)
    if (!URL.canParse(url) || !/^https?:$/.test(new URL(url).protocol))
      throw new TypeError('koa-model-gateway: webhookNotifier(): each webhook needs an http(s) url');
  let queued = 0;

  const deliver = async (alert: BudgetAlert, webhook: AlertWebhook) => {
    const body = JSON.stringify(webhook.format === 'slack' ? slackBody(alert) : alert);
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (secret !== undefined) headers['x-kmg-signature'] = `sha256=${createHmac('sha256', secret).update(body).digest('hex')}`;
    let error: Error | undefined;
    for (let attempt = 1; attempt <= attempts; attempt++) {
      if (attempt > 1) await sleep(Math.min(MAX_BACKOFF_MS, backoffMs * 2 ** (attempt - 2)));
      try {
        const answer = await send(webhook.url, { method: 'POST', headers, body, signal: AbortSignal.timeout(timeoutMs), redirect: 'manual' });
        await answer.body?.cancel();
        if (answer.ok) return onOutcome?.({ alert, url: webhook.url, attempts: attempt });
        error = new Error(`the webhook answered ${answer.status}`);
      } catch (err) {
        error = err as Error;
      }
    }
    onOutcome?.({ alert, url: webhook.url, attempts, error: error as Error });
  };

  return (alert) => {
    for (const webhook of webhooks) {
      if (queued >= maxQueued) {
        onOutcome?.({ alert, url: webhook.url, attempts: 0, error: new Error(`more than ${maxQueued} alerts waiting: dropped`) });
        continue;
      }
      queued += 1;
      void deliver(alert, webhook).finally(() => (queued -= 1));
    }
  };
}
