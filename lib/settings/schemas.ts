import { z } from 'zod';

/*
 * The building blocks of every options and configuration schema, so that one setting is refused
 * in the same words wherever it is checked (a factory, the reference server's config file). Each
 * message is a predicate: `settingsMessage` puts the setting's path in front of it.
 */

const POSITIVE = 'must be a positive integer';
const NON_NEGATIVE = 'must be a non-negative integer';
const NON_EMPTY = 'must be a non-empty string';
const HTTP_URL = 'must be an http:// or https:// URL';

/** A safe integer of at least 1. */
export const positiveInteger = z.int({ error: POSITIVE }).min(1, { error: POSITIVE });

/** A safe integer of at least 0. */
export const nonNegativeInteger = z.int({ error: NON_NEGATIVE }).min(0, { error: NON_NEGATIVE });

export const nonEmptyString = z.string({ error: NON_EMPTY }).min(1, { error: NON_EMPTY });

const ENV_NAME = 'must name an environment variable (letters, digits and _)';

/** The name of an environment variable that holds a credential, which a setting names rather than holds. */
export const environmentVariableName = z.string({ error: ENV_NAME }).regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: ENV_NAME });

/** The longest delay a Node timer takes, in ms (2^31 - 1, about 24.8 days): a longer one fires at once. */
const MAX_TIMER_MS = 2 ** 31 - 1;
const TIMER_MS = `must be a positive integer of milliseconds, at most ${MAX_TIMER_MS} (about 24.8 days)`;
const TIMER_SECONDS = `must be a non-negative integer of seconds, at most ${Math.floor(MAX_TIMER_MS / 1000)} (about 24.8 days)`;

/** A delay in ms that a timer waits: a positive integer a Node timer can hold. */
export const timerMs = z.int({ error: TIMER_MS }).min(1, { error: TIMER_MS }).max(MAX_TIMER_MS, { error: TIMER_MS });

/** An interval in seconds that a timer waits (0: none): a non-negative integer a Node timer can hold in ms. */
export const timerSeconds = z
  .int({ error: TIMER_SECONDS })
  .min(0, { error: TIMER_SECONDS })
  .max(Math.floor(MAX_TIMER_MS / 1000), { error: TIMER_SECONDS });

/**
 * An http(s) base URL without credentials in it: fetch refuses such a URL on every request, and
 * the message never repeats the URL, password and all.
 */
export const httpBaseUrl = z
  .string({ error: HTTP_URL })
  .refine((value) => URL.canParse(value) && ['http:', 'https:'].includes(new URL(value).protocol), { error: HTTP_URL, abort: true })
  .refine(
    (value) => {
      const url = new URL(value);
      return url.username === '' && url.password === '';
    },
    { error: 'must not hold credentials' },
  );

/**
 * An object of settings whose unknown keys are refused, so that a typo (`baseUrl`,
 * `upstream_model`) is not silently ignored.
 * @example const options = settingsObject({ timeoutMs: positiveInteger.optional() })
 */
export function settingsObject<Shape extends z.ZodRawShape>(shape: Shape) {
  const expected = Object.keys(shape).join(', ');
  return z.strictObject(shape, {
    error: (issue) => (issue.code === 'unrecognized_keys' ? `is not a setting (expected ${expected})` : 'must be an object'),
  });
}

const pathText = (path: readonly PropertyKey[]) =>
  path.reduce<string>((text, part) => (typeof part === 'number' ? `${text}[${part}]` : text === '' ? String(part) : `${text}.${String(part)}`), '');

/**
 * The first problem of a failed parse as one line: the setting's path, then what is wrong with
 * it (`limits.maxFiles must be a positive integer`). `whole` names the value when the problem is
 * the value itself.
 * @example throw new Error(`config.json: ${settingsMessage(result.error, 'the config')}`)
 */
export function settingsMessage(error: z.ZodError, whole = 'the value'): string {
  const issue = error.issues[0];
  if (issue === undefined) return `${whole} is invalid`;
  // An unknown key is named in the path, like any other setting.
  const path = issue.code === 'unrecognized_keys' ? [...issue.path, issue.keys[0] ?? ''] : issue.path;
  return `${pathText(path) || whole} ${issue.message}`;
}

/**
 * Parses a factory's options once, when the factory runs: a bad option throws a TypeError
 * `koa-model-gateway: <where>: <setting> <what is wrong>`.
 * @example const { timeoutMs } = parseOptions(schema, options, 'chatCompletions()')
 */
export function parseOptions<Schema extends z.ZodType>(schema: Schema, options: unknown, where: string): z.output<Schema> {
  const result = schema.safeParse(options);
  if (!result.success) throw new TypeError(`koa-model-gateway: ${where}: ${settingsMessage(result.error, 'the options')}`);
  return result.data;
}
