import { createHmac } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BudgetAlert } from '../../lib/cost/budget-alerts.js';
import { keepIdle } from './http.js';

/**
 * A budget alerts' webhook receiver on a random loopback port: what it received, with whether each
 * body's `x-kmg-signature` is the HMAC-SHA256 of its raw bytes keyed by `secret`.
 */
export async function webhookReceiver(secret: string) {
  const received: Array<{ body: BudgetAlert; signed: boolean }> = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const raw = Buffer.concat(chunks);
      const signed = req.headers['x-kmg-signature'] === `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;
      received.push({ body: JSON.parse(raw.toString('utf8')) as BudgetAlert, signed });
      res.end('ok');
    });
  });
  await new Promise<void>((resolve) => keepIdle(server).listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return { url, received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}
