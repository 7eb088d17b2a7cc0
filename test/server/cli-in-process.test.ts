import { join } from 'node:path';
import test from 'ava';
import { UsageError, runCommand } from '../../reference-server/commands.js';
import { tempDataDir } from '../helpers/server-process.js';

// The CLI's commands run in this process against a data dir of their own: no tsx start-up per call.
const dirs: Array<{ remove(): Promise<void> }> = [];
test.after.always(() => Promise.all(dirs.map((dir) => dir.remove())));

async function dataDir(): Promise<{ DATA_DIR: string }> {
  const temp = await tempDataDir();
  dirs.push(temp);
  return { DATA_DIR: join(temp.dir, 'data') };
}

/** Runs one command; its output lines, joined. */
async function run(args: string[], env: Record<string, string>): Promise<{ code: number; out: string; err: string }> {
  const out: string[] = [];
  const err: string[] = [];
  const code = await runCommand(args, { env, out: (text) => out.push(text), err: (text) => err.push(text) });
  return { code, out: out.join('\n'), err: err.join('\n') };
}

test('keys create takes --rpm, --tpm and --tokens-per-day; list shows them, null for a limit left to the default', async (t) => {
  const env = await dataDir();
  const created = await run(['keys', 'create', '--account', 'acme', '--rpm', '10', '--tokens-per-day', '5000000', '--json'], env);
  t.is(created.code, 0, created.err);
  const limits = { requests_per_minute: 10, tokens_per_minute: null, tokens_per_day: 5_000_000 };
  t.deepEqual(JSON.parse(created.out).limits, limits);
  await run(['keys', 'create', '--account', 'acme', '--tpm', '40000'], env);
  const listed = JSON.parse((await run(['keys', 'list', '--json'], env)).out) as Array<{ limits: unknown }>;
  t.deepEqual(
    listed.map((key) => key.limits),
    [limits, { requests_per_minute: null, tokens_per_minute: 40_000, tokens_per_day: null }],
  );
  t.regex((await run(['keys', 'list'], env)).out, /limits 10 requests\/min, 5000000 tokens\/day\n.*limits 40000 tokens\/min$/);
});

for (const [option, value] of [
  ['--rpm', '0'],
  ['--tpm', '-5'],
  ['--tpm', '- 5'],
  ['--tokens-per-day', '1.5'],
  ['--rpm', '1e3'],
  ['--rpm', '99999999999999999999'],
]) {
  test(`keys create ${option}=${value} is refused with one line, and creates no key`, async (t) => {
    const env = await dataDir();
    await t.throwsAsync(run(['keys', 'create', '--account', 'acme', `${option}=${value}`], env), {
      instanceOf: UsageError,
      message: `${option} must be a positive integer, got '${value}'`,
    });
    t.is((await run(['keys', 'list'], env)).out, 'No keys.');
  });
}

test('a negative limit written as a separate argument is refused with one line too', async (t) => {
  const err = await t.throwsAsync(run(['keys', 'create', '--account', 'acme', '--rpm', '-1'], await dataDir()), { instanceOf: UsageError });
  t.notRegex(err?.message ?? '', /\n/);
});
