import { canonicalAccountName } from 'koa-model-gateway/auth';
import { ACCOUNT_NAME_RULE } from '../lib/auth/account-name.js';

/** A command line that does not say what to do: printed with a pointer to --help, exit code 2. */
export class UsageError extends Error {
  override readonly name = 'UsageError';
}

export interface CommandIo {
  env: Readonly<Record<string, string | undefined>>;
  out(text: string): void;
  err(text: string): void;
}

/** An `--account` (or account argument) as the key stores keep it, or a `UsageError` saying the rule. */
export function accountOption(value: string): string {
  const account = canonicalAccountName(value);
  if (account === undefined) throw new UsageError(`--account ${ACCOUNT_NAME_RULE}`);
  return account;
}

