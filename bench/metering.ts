/**
 * Metering: the CPU a model call costs with metering on and off. Two servers of the models API
 * (bench/servers/models-gateway.ts) on the offline echo provider, one with metering on (usage
 * records batched to SQLite, the key's limits counted, the metrics), one without; each answers
 * Chat Completions calls, whole and streamed. Servers on core 0, autocannon on core 1; the four
 * cases interleaved over BENCH_ROUNDS rounds (default 3), medians shown.
 * Run: node --import tsx bench/metering.ts
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { generateApiKey } from '../lib/auth/keys.js';
import { DURATION, load, median, type LoadResult } from './lib/load.js';
import { freePort, isMain, startService, type Service } from './lib/processes.js';
import { becomeLoadGenerator, machine, PINNING, SERVER_CORE } from './lib/system.js';
import { num, table } from './lib/table.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONNECTIONS = 20;

interface Case {
  name: string;
  service: Service;
  stream: boolean;
}

async function modelsGateway(metering: 'on' | 'off', key: string, dataDir: string): Promise<Service> {
  const port = await freePort();
  return startService({
    name: `models gateway, metering ${metering}`,
    script: 'bench/servers/models-gateway.ts',
    env: { PORT: String(port), METERING: metering, BENCH_KEY: key, DATA_DIR: dataDir },
    core: SERVER_CORE,
    port,
    readyPath: '/healthz',
  });
}

function callBody(stream: boolean): Buffer {
  return Buffer.from(
    JSON.stringify({
      model: 'echo-1',
      stream,
      messages: [
        { role: 'system', content: 'You are a careful assistant.' },
        { role: 'user', content: 'Summarise the attached quarterly report in three sentences, naming the figures.' },
      ],
    }),
  );
}

export async function metering(): Promise<string> {
  becomeLoadGenerator();
  const dataDir = await mkdtemp(join(tmpdir(), 'kmg-bench-metering-'));
  const { key } = generateApiKey('kmg');
  const services: Service[] = [];
  try {
    const off = await modelsGateway('off', key, dataDir);
    services.push(off);
    const on = await modelsGateway('on', key, dataDir);
    services.push(on);
    const cases: Case[] = [
      { name: 'whole answer, metering off', service: off, stream: false },
      { name: 'whole answer, metering on', service: on, stream: false },
      { name: 'streamed answer, metering off', service: off, stream: true },
      { name: 'streamed answer, metering on', service: on, stream: true },
    ];
    const runs = new Map<string, LoadResult[]>(cases.map((c) => [c.name, []]));
    for (let round = 1; round <= ROUNDS; round++) {
      for (const c of cases) {
        process.stderr.write(`metering: round ${round}/${ROUNDS}: ${c.name}\n`);
        const result = await load({
          url: `${c.service.url}/v1/chat/completions`,
          method: 'POST',
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: callBody(c.stream),
          connections: CONNECTIONS,
          expectStatus: 200,
          pid: c.service.pid,
        });
        runs.get(c.name)?.push(result);
      }
    }
    const rows = cases.map((c) => {
      const results = runs.get(c.name) ?? [];
      return {
        name: c.name,
        rps: median(results.map((run) => run.requestsPerSecond)),
        p50: median(results.map((run) => run.p50)),
        cpu: median(results.map((run) => run.cpuMicrosPerRequest)),
        each: results.map((run) => num(run.cpuMicrosPerRequest, 0)).join(' / '),
        failures: results.reduce((sum, run) => sum + run.failures, 0),
      };
    });
    const cpuOf = (name: string) => rows.find((row) => row.name === name)?.cpu ?? Number.NaN;
    const report = table(rows, [
      { heading: 'case', cell: (row) => row.name },
      { heading: 'req/s', cell: (row) => num(row.rps), align: 'right' },
      { heading: 'p50 ms', cell: (row) => num(row.p50, 1), align: 'right' },
      { heading: 'server CPU µs/call (median)', cell: (row) => num(row.cpu, 0), align: 'right' },
      { heading: 'each round', cell: (row) => row.each, align: 'right' },
      { heading: 'unexpected', cell: (row) => num(row.failures), align: 'right' },
    ]);
    const cost = (kind: string) => {
      const extra = cpuOf(`${kind}, metering on`) - cpuOf(`${kind}, metering off`);
      return `${kind}: metering costs ${num(extra, 0)} µs of server CPU per call (${num((extra / cpuOf(`${kind}, metering off`)) * 100, 0)} % more)`;
    };
    return [
      `## Metering (${CONNECTIONS} connections, ${DURATION} s per run, median of ${ROUNDS} interleaved rounds, ${PINNING ? 'servers on core 0, load on core 1' : 'not pinned'})`,
      machine(),
      '',
      report,
      '',
      cost('whole answer'),
      cost('streamed answer'),
    ].join('\n');
  } finally {
    await Promise.all(services.map((service) => service.stop()));
    await rm(dataDir, { recursive: true, force: true });
  }
}

if (isMain(import.meta.url)) console.log(await metering());
