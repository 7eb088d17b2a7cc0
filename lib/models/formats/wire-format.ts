import { isObject, type JsonObject } from '../content.js';
import {
  EFFORTS,
  invalid,
  OPENAI_SHARED_FIELDS,
  untranslatable,
  type Answer,
  type Effort,
  type Request,
  type StreamReader,
  type StreamWriter,
} from './neutral.js';

/**
 * One wire format as translation sees it: what it reads and writes as the client's format
 * (requests in, answers and streams out) and, when a provider speaking it can be translated to,
 * as the provider's (requests out, answers and streams in). Each reader refuses (400, by name)
 * what the neutral representation cannot hold; each writer refuses what its own format cannot
 * carry, by the client's name for it (`ReadRequest.params`).
 */
export interface WireFormat {
  /** Its name in messages: "Chat Completions". */
  readonly name: string;
  readonly client: {
    /** `target` names the provider's format in refusals. */
    readRequest(body: JsonObject, target: string): ReadRequest;
    /**
     * Refuses a header meant for the upstream (lower-case names) whose effect a translated call
     * cannot have; answers the values it leaves out, named as `x-kmg-omitted` names them.
     */
    checkHeaders?(headers: Readonly<Record<string, string>>, target: string): string[];
    writeAnswer(answer: Answer, request: Request): JsonObject;
    streamWriter(request: Request): StreamWriter;
  };
  readonly provider?: {
    writeRequest(request: ReadRequest): JsonObject;
    readAnswer(body: JsonObject): Answer;
    streamReader(): StreamReader;
  };
}

/** A neutral request with the names its fields had in the client's format, for the refusals of a writer. */
export interface ReadRequest extends Request {
  params: Partial<Record<keyof Request, string>>;
  /** The client's fields left out (class `omitted`), by name, each once: the answer's `x-kmg-omitted`. */
  omitted: string[];
}

/**
 * The four classes of a client's field in a translated call (docs/TRANSLATION.md):
 * - `carried`: mapped to the target's equivalent;
 * - `omitted`: a hint that cannot change the answer's content, left out and named in `x-kmg-omitted`;
 * - `refused`: it would change the answer and the target has no equivalent: 400 naming it;
 * - `validated`: carried within the target's bounds, checked before anything is sent.
 */
export type FieldClass = 'carried' | 'omitted' | 'refused' | 'validated';

/** The formats by their names, as `target` gives them to a reader. */
export type FormatName = 'Chat Completions' | 'Responses' | 'Messages';

/** How translation treats one field of a client's request: the data its reader, its writer and docs/TRANSLATION.md follow. */
export interface FieldRule {
  /** Its class, the same to every target, or by the target's name. */
  readonly class: FieldClass | Readonly<Partial<Record<FormatName, FieldClass>>>;
  /** Values that change nothing (its default): accepted whatever the class, and never named. Unset: null. */
  readonly inert?: (value: unknown) => boolean;
  /** What becomes of it, in a few words, for the docs. */
  readonly note: string;
}

export type FieldRules = Readonly<Record<string, FieldRule>>;

const FORMAT_NAMES: readonly string[] = ['Chat Completions', 'Responses', 'Messages'] satisfies FormatName[];
/** The classes from the one that keeps most of a field to the one that keeps least. */
const WIDEST_FIRST: readonly FieldClass[] = ['carried', 'validated', 'omitted', 'refused'];

/**
 * The class of `rule` when the call is translated to `target`: `refused` for a format it does not
 * name. To a provider of the neutral representation (any other target), the widest class it has
 * towards a format: the neutral request holds the field, and the provider's `check()` refuses or
 * omits what its API cannot carry.
 */
export function classOf(rule: FieldRule, target: string): FieldClass {
  if (typeof rule.class === 'string') return rule.class;
  const named = rule.class[target as FormatName];
  if (named !== undefined || FORMAT_NAMES.includes(target)) return named ?? 'refused';
  const classes = Object.values(rule.class);
  return WIDEST_FIRST.find((kind) => classes.includes(kind)) ?? 'refused';
}

/**
 * Sorts the fields of `body` by `rules` for a call translated to `target`: a field no rule names, or
 * one in class `refused` with a value that is not inert, is refused (400, by name); one in class
 * `omitted` is added to `omitted` by its name. Carried and validated fields are left to the reader.
 */
export function sortFields(body: JsonObject, rules: FieldRules, target: string, omitted: string[], prefix = ''): void {
  for (const [key, value] of Object.entries(body)) {
    const rule = Object.hasOwn(rules, key) ? rules[key] : undefined;
    if (rule === undefined) throw untranslatable(`${prefix}${key}`, target);
    if (absent(value) || rule.inert?.(value)) continue;
    const kind = classOf(rule, target);
    if (kind === 'refused') throw untranslatable(`${prefix}${key}`, target);
    if (kind === 'omitted') omit(omitted, key);
  }
}

/** Adds `name` to a request's omitted fields, once. */
export function omit(omitted: string[], name: string): void {
  if (!omitted.includes(name)) omitted.push(name);
}

/** A data URL's media type and base64 data; undefined for any other URL. */
export function parseDataUrl(url: string): { mediaType: string; data: string } | undefined {
  const match = /^data:([^;,]+)(?:;[^,]*)?;base64,/.exec(url);
  return match ? { mediaType: match[1] as string, data: url.slice(match[0].length) } : undefined;
}

export const dataUrl = (mediaType: string, data: string) => `data:${mediaType};base64,${data}`;

/** `body[param]` when it is a finite number, undefined when absent or null; anything else is refused by name. */
export function optionalNumber(body: JsonObject, param: string): number | undefined {
  const value = body[param];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'number' || !Number.isFinite(value)) throw invalid(param, 'must be a number');
  return value;
}

/** `body[param]` when it is a string, undefined when absent or null; anything else is refused by name. */
export function optionalString(body: JsonObject, param: string): string | undefined {
  const value = body[param];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'string') throw invalid(param, 'must be a string');
  return value;
}

/**
 * `messages` as every format needs them, whether the call is forwarded as it is or translated: a
 * non-empty array of objects, each with a string `role`. Refused (400, by name) before the model is
 * looked up, so that no provider is sent, and no limit counts, a call it would refuse for its shape.
 */
export function checkMessages(messages: unknown): void {
  if (!Array.isArray(messages) || messages.length === 0) throw invalid('messages', 'must be a non-empty array');
  messages.forEach((message, index) => {
    if (!isObject(message) || typeof message.role !== 'string') throw invalid(`messages[${index}].role`, 'must be a string');
  });
}

/**
 * Refuses a token limit that is not a positive integer, as every format's API does (absent or null
 * passes, unless `required`): checked for every call, native or translated, before anything is sent.
 */
export function checkTokenLimit(body: JsonObject, param: string, required = false): void {
  const value = body[param];
  if (!required && (value === undefined || value === null)) return;
  if (!Number.isSafeInteger(value) || (value as number) < 1) throw invalid(param, 'must be a positive integer');
}

/** `body[param]` when it is a boolean, undefined when absent or null; anything else is refused by name. */
export function optionalBoolean(body: JsonObject, param: string): boolean | undefined {
  const value = body[param];
  if (value === undefined || value === null) return undefined;
  if (typeof value !== 'boolean') throw invalid(param, 'must be a boolean');
  return value;
}

/**
 * Refuses a tool choice that demands a call (`required`, or one tool by name) in a request without
 * tools, as every format's API does: the target's writer, which sends no choice without tools,
 * would otherwise drop it.
 */
export function checkToolChoice(request: ReadRequest): void {
  const { toolChoice, tools, params } = request;
  if (tools.length === 0 && (toolChoice?.type === 'required' || toolChoice?.type === 'tool'))
    throw invalid(params.toolChoice ?? 'tool_choice', "requires 'tools'");
}

/**
 * Refuses a `stream` that is neither a boolean nor null: a call is streamed only for `true`, and
 * `"yes"` would be answered whole where the client asked for events.
 */
export function checkStream(stream: unknown): void {
  if (stream !== undefined && stream !== null && typeof stream !== 'boolean') throw invalid('stream', 'must be a boolean');
}

/**
 * Refuses every field of `body` that `known` does not list, or lists with a check it fails: what
 * a reader does not carry over is never dropped silently.
 */
export function refuseUnknown(body: JsonObject, known: Readonly<Record<string, (value: unknown) => boolean>>, target: string, prefix = ''): void {
  for (const [key, value] of Object.entries(body)) {
    const accepts = Object.hasOwn(known, key) ? known[key] : undefined;
    if (accepts === undefined || !accepts(value)) throw untranslatable(`${prefix}${key}`, target);
  }
}

/** Field checks for `refuseUnknown()`. */
export const any = () => true;
export const absent = (value: unknown) => value === null || value === undefined;
/** Unset, or the value everything else behaves as anyway. */
export const defaultOnly = (expected: unknown) => (value: unknown) => absent(value) || value === expected;

/** The `OPENAI_SHARED_FIELDS` that `body` sets, for a reader of either OpenAI format; undefined when none. */
function readOpenAIShared(body: JsonObject): Request['openAI'] {
  let shared: Request['openAI'];
  for (const field of OPENAI_SHARED_FIELDS) if (!absent(body[field])) (shared ??= {})[field] = body[field];
  return shared;
}

/**
 * The end user of an OpenAI body, and OpenAI's shared fields, as `target` takes them: between the
 * OpenAI formats as they are; to Messages, `safety_identifier` (else `user`) as its end user's id,
 * `user` omitted when both are set (the hints are omitted by their rules).
 */
export function readEndUser(body: JsonObject, target: string, omitted: string[]): Pick<Request, 'user' | 'openAI'> {
  const user = optionalString(body, 'user');
  const safetyIdentifier = optionalString(body, 'safety_identifier');
  if (target !== 'Messages') {
    const openAI = readOpenAIShared(body);
    return { ...(user !== undefined && { user }), ...(openAI && { openAI }) };
  }
  if (safetyIdentifier !== undefined && user !== undefined) omit(omitted, 'user');
  const id = safetyIdentifier ?? user;
  return id === undefined ? {} : { user: id };
}

/** An OpenAI effort (`reasoning_effort`, `reasoning.effort`), read; undefined when unset. */
export function readEffort(value: unknown, param: string): Request['reasoning'] {
  if (absent(value)) return undefined;
  if (!EFFORTS.includes(value as Effort)) throw invalid(param, `must be one of ${EFFORTS.join(', ')}`);
  return { effort: value as Effort };
}

/** The JSON text of a tool call's arguments as an object, as Messages and Responses items carry them. */
export function argumentsObject(input: string): JsonObject {
  try {
    const value: unknown = JSON.parse(input === '' ? '{}' : input);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return value as JsonObject;
  } catch {
    // The model wrote arguments that are not JSON: kept, as the one field they fit in.
  }
  return { arguments: input };
}
