import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

// The answers of the server checked against docs/openapi.json, so that the document cannot drift
// from what the server does: every status, required header and JSON body an operation gives must
// be the document's. OpenAPI 3.1's schemas are JSON Schema 2020-12, which Ajv2020 speaks.

type Json = Record<string, unknown>;

export const OPENAPI_DOCUMENT = JSON.parse(readFileSync('docs/openapi.json', 'utf8')) as Json;
const DOCUMENT_ID = 'openapi.json';

const ajv = new Ajv2020({ allErrors: true, strict: true });
addFormats.default(ajv);
// The document is added whole, so that its $refs resolve: its own fields are no schema keywords.
ajv.addVocabulary(Object.keys(OPENAPI_DOCUMENT));
ajv.addSchema(OPENAPI_DOCUMENT, DOCUMENT_ID);

const paths = OPENAPI_DOCUMENT.paths as Record<string, Record<string, Json>>;
const escapePointer = (part: string) => part.replace(/~/g, '~0').replace(/\//g, '~1');
const escapeRegExp = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/** The document's path templates as patterns: exact paths first, then one segment per parameter, then any. */
const templates = [
  ...Object.keys(paths)
    .filter((path) => !path.includes('{'))
    .map((path) => ({ path, pattern: new RegExp(`^${escapeRegExp(path)}$`) })),
  ...['[^/]+', '.+'].flatMap((parameter) =>
    Object.keys(paths)
      .filter((path) => path.includes('{'))
      .map((path) => ({
        path,
        pattern: new RegExp(
          `^${path
            .split(/\{[^}]+\}/)
            .map(escapeRegExp)
            .join(parameter)}$`,
        ),
      })),
  ),
];

/** The object a `$ref` inside the document points at, with its pointer; anything else as it is. */
function resolve(value: Json, pointer: string): { value: Json; pointer: string } {
  const target = value.$ref;
  if (typeof target !== 'string') return { value, pointer };
  const found = target
    .slice(2)
    .split('/')
    .reduce<unknown>((node, part) => (node as Json)[part.replace(/~1/g, '/').replace(/~0/g, '~')], OPENAPI_DOCUMENT) as Json;
  return resolve(found, target.slice(1));
}

const validators = new Map<string, ValidateFunction>();
function validatorAt(pointer: string): ValidateFunction {
  let validate = validators.get(pointer);
  if (validate === undefined) {
    validate = ajv.getSchema(`${DOCUMENT_ID}#${pointer}`);
    if (validate === undefined) throw new Error(`no schema at ${pointer}`);
    validators.set(pointer, validate);
  }
  return validate;
}

function schemaProblems(pointer: string, value: unknown, what: string): string[] {
  const validate = validatorAt(pointer);
  return validate(value) ? [] : [`${what}: ${ajv.errorsText(validate.errors)}`];
}

/** An answer as the checker reads it: its JSON body, when it has one, already parsed. */
export interface CheckedAnswer {
  status: number;
  headers: Headers;
  json?: unknown;
}

/**
 * What in `answer` to `method path` disagrees with the document: an empty list when nothing does.
 * A path the document does not have must be refused in either error shape: 404 or 405, or 401
 * under /v1 and /admin/v1, where every path needs a key or an admin token first. A method a path of
 * the document does not have is refused likewise, but its 405 must be the one the path's
 * operations list.
 * @example t.deepEqual(checkAnswer('GET', '/v1/files', { status, headers, json }), [])
 */
export function checkAnswer(method: string, path: string, answer: CheckedAnswer): string[] {
  const where = `${method} ${path} → ${answer.status}`;
  const template = templates.find(({ pattern }) => pattern.test(path))?.path;
  const item = template === undefined ? undefined : paths[template];
  let name = method.toLowerCase();
  // OpenAPI has no responses per path: a method the path does not have gets the 405 its operations list.
  if (item !== undefined && item[name] === undefined && answer.status === 405) {
    name = Object.keys(item).find((other) => (item[other]?.responses as Json | undefined)?.['405'] !== undefined) ?? name;
  }
  const operation = item?.[name];
  if (template === undefined || operation === undefined) {
    const refused = answer.status === 404 || (answer.status === 405 && item === undefined) || (answer.status === 401 && /^\/(admin\/)?v1(\/|$)/.test(path));
    if (!refused) return [`${where}: not in the document`];
    const errors = [...schemaProblems('/components/schemas/ErrorA', answer.json, where)];
    return errors.length === 0 ? [] : schemaProblems('/components/schemas/ErrorB', answer.json, where);
  }
  const operationPointer = `/paths/${escapePointer(template)}/${name}`;
  const responses = operation.responses as Record<string, Json>;
  const declared = responses[String(answer.status)];
  if (declared === undefined) return [`${where}: status not in the document`];
  const response = resolve(declared, `${operationPointer}/responses/${answer.status}`);
  const problems: string[] = [];
  const documented = (response.value.headers ?? {}) as Record<string, Json>;
  // The gateway's own headers are its contract: each one an answer carries is in the document.
  answer.headers.forEach((_, name) => {
    if (/^x-(kmg|ratelimit)-/.test(name) && !Object.keys(documented).some((declared) => declared.toLowerCase() === name)) {
      problems.push(`${where}: header ${name} not in the document`);
    }
  });
  for (const [name, header] of Object.entries(documented)) {
    const { value, pointer } = resolve(header, `${response.pointer}/headers/${escapePointer(name)}`);
    const sent = answer.headers.get(name);
    if (sent === null) {
      if (value.required === true) problems.push(`${where}: no ${name} header`);
    } else {
      problems.push(...schemaProblems(`${pointer}/schema`, sent, `${where}: header ${name}`));
    }
  }
  const content = response.value.content as Record<string, unknown> | undefined;
  const type = (answer.headers.get('content-type') ?? '').split(';')[0]?.trim() ?? '';
  if (content === undefined) return problems;
  if (!(type in content)) return [...problems, `${where}: content type '${type}' not in the document`];
  if (type === 'application/json') {
    problems.push(...schemaProblems(`${response.pointer}/content/application~1json/schema`, answer.json, `${where}: body`));
  }
  return problems;
}

/**
 * A `fetch` that checks each answer against the document before handing it on, pushing what
 * disagrees to `problems`: give it to the SDKs (their `fetch` option) and to the tests' own calls.
 * An event stream's body is left to its reader; what is not an HTTP request (the openai SDK
 * fetches a `data:` URL to probe its fetch) is not checked.
 */
export function checkedFetch(problems: string[]): typeof fetch {
  return async (input, init) => {
    const request = new Request(input, init);
    const response = await fetch(request);
    if (!/^https?:/.test(request.url)) return response;
    const checked: CheckedAnswer = { status: response.status, headers: response.headers };
    if (/^application\/json\b/.test(response.headers.get('content-type') ?? '')) checked.json = await response.clone().json();
    problems.push(...checkAnswer(request.method, new URL(request.url).pathname, checked));
    return response;
  };
}
