/**
 * Node flags: the reference server's CPU per proxied Chat Completions call started with each set of
 * Node flags (BENCH_NODE_FLAGS: sets separated by `;`, flags within a set by spaces; default: none,
 * `--max-semi-space-size=32`, `--single-threaded-gc`), beside the bare Koa + undici floor. Every
 * server as `bench:proxy` starts its headline case (dist/, the log to a pipe, SQLite, `modelLimits`
 * and METRICS_PORT) in front of the mock upstream; 50 connections; the cases interleaved over
 * BENCH_ROUNDS rounds (default 5), each after BENCH_WARMUP s and for BENCH_DURATION s. Servers on
 * core 0, the load and the mock on core 1. Not part of `npm run bench`.
 * Run: node --import tsx bench/node-flags.ts
 */
import { createDeployment } from './lib/gateway.js';
import { DURATION, load } from './lib/load.js';
import { freePort, isMain, type Service } from './lib/processes.js';
import { startBareProxy, startMockUpstream } from './lib/proxies.js';
import { becomeLoadGenerator, machine, PINNING } from './lib/system.js';
import { num, spread, table } from './lib/table.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const CONNECTIONS = 50;
const FLAG_SETS = (process.env.BENCH_NODE_FLAGS ?? ';--max-semi-space-size=32;--single-threaded-gc').split(';').map((set) => set.split(' ').filter(Boolean));
const BODY = Buffer.from(JSON.stringify({ model: 'bench-gpt', messages: [{ role: 'user', content: 'Say hello.' }], max_tokens: 16 }));
const JSON_HEADERS = { 'content-type': 'application/json' };

interface Case {
  name: string;
  service: Service;
  headers: Record<string, string>;
  cpu: number[];
  requestsPerSecond: number[];
}

export async function nodeFlags(): Promise<string> {
  becomeLoadGenerator();
  const mock = await startMockUpstream(1000);
  const deployment = await createDeployment({
    database: 'sqlite',
    asUser: true,
    config: {
      providers: [{ id: 'mock-openai', kind: 'openai', baseURL: `${mock.url}/v1` }],
      models: [{ id: 'bench-gpt', provider: 'mock-openai', upstreamModel: 'mock-gpt' }],
      modelLimits: { requestsPerMinute: 1_000_000_000, tokensPerMinute: 1_000_000_000_000 },
    },
  });
  const services: Service[] = [mock];
  try {
    const { key } = await deployment.createKey('acct_node_flags');
    const floor = await startBareProxy(mock.url, { 'bench-gpt': 'mock-gpt' });
    services.push(floor);
    const cases: Case[] = [{ name: 'floor: bare Koa + undici Pool, answer parsed', service: floor, headers: JSON_HEADERS, cpu: [], requestsPerSecond: [] }];
    for (const flags of FLAG_SETS) {
      const service = await deployment.serve({ nodeFlags: flags, env: { METRICS_PORT: String(await freePort()) } });
      const name = `reference server, ${flags.length === 0 ? 'no flags' : flags.join(' ')}`;
      cases.push({ name, service, headers: { ...JSON_HEADERS, authorization: `Bearer ${key}` }, cpu: [], requestsPerSecond: [] });
    }
    for (let round = 1; round <= ROUNDS; round++) {
      for (const c of cases) {
        console.error(`node-flags: round ${round}/${ROUNDS}: ${c.name}`);
        const result = await load({
          url: `${c.service.url}/v1/chat/completions`,
          method: 'POST',
          headers: c.headers,
          body: BODY,
          connections: CONNECTIONS,
          expectStatus: 200,
          pid: c.service.pid,
        });
        if (result.failures > 0) throw new Error(`node-flags: ${c.name} answered ${JSON.stringify(result.statuses)}`);
        c.cpu.push(result.cpuMicrosPerRequest);
        c.requestsPerSecond.push(result.requestsPerSecond);
      }
    }
    const floorCpu = cases[0]?.cpu ?? [];
    return [
      `## Node flags (${CONNECTIONS} connections, ${DURATION} s per run, ${ROUNDS} interleaved rounds, each figure lowest–highest; ${PINNING ? 'servers on core 0, load and mock upstream on core 1' : 'not pinned'})`,
      machine(),
      '',
      table(cases, [
        { heading: 'case', cell: (c) => c.name },
        { heading: 'req/s', cell: (c) => spread(c.requestsPerSecond, (value) => num(value)), align: 'right' },
        { heading: 'server CPU µs/call', cell: (c) => spread(c.cpu, (value) => num(value)), align: 'right' },
        {
          heading: 'vs floor',
          cell: (c) =>
            spread(
              c.cpu.map((cpu, index) => cpu / (floorCpu[index] ?? Number.NaN)),
              (value) => `${value.toFixed(2)}x`,
            ),
          align: 'right',
        },
      ]),
    ].join('\n');
  } finally {
    await deployment.destroy();
    await Promise.all(services.map((service) => service.stop()));
  }
}

if (isMain(import.meta.url)) console.log(await nodeFlags());
