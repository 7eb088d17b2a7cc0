import { readFileSync } from 'node:fs';
import { Ajv2020, type ErrorObject } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

// OpenAI's published schemas of its answers (test/fixtures/openai-openapi/, an extract of the
// openai/openai-openapi document), to check the answers the gateway writes itself against them.

type Json = Record<string, unknown>;

const EXTRACT = JSON.parse(readFileSync('test/fixtures/openai-openapi/schemas.json', 'utf8')) as { components: { schemas: Record<string, Json> } };
const DOCUMENT_ID = 'openai-openapi.json';

/**
 * The document's few keywords that are not JSON Schema 2020-12, as their authors mean them: an
 * OpenAPI 3.0 `nullable: true` also allows null; a `$recursiveRef: "#"` (2019-09) is the schema
 * whose `$recursiveAnchor` it sits under.
 */
function normalized(node: unknown, anchor: string | undefined): unknown {
  if (Array.isArray(node)) return node.map((item) => normalized(item, anchor));
  if (typeof node !== 'object' || node === null) return node;
  const { nullable, $recursiveAnchor, $recursiveRef, ...rest } = node as Json;
  if ($recursiveRef !== undefined) {
    if ($recursiveRef !== '#' || anchor === undefined) throw new Error(`unexpected $recursiveRef ${String($recursiveRef)}`);
    rest.$ref = anchor;
  }
  void $recursiveAnchor;
  const schema = Object.fromEntries(
    Object.entries(rest).map(([key, value]) => [
      key,
      key === 'example' || key === 'default' || key === 'enum' || key === 'const' ? value : normalized(value, anchor),
    ]),
  );
  return nullable === true ? { anyOf: [schema, { type: 'null' }] } : schema;
}

const schemas = Object.fromEntries(
  Object.entries(EXTRACT.components.schemas).map(([name, schema]) => [
    name,
    normalized(schema, schema.$recursiveAnchor === true ? `#/components/schemas/${name}` : undefined),
  ]),
);

// strictRequired off: the document requires, in an allOf's branch, properties another branch defines.
const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false });
addFormats.default(ajv);
// OpenAI's own format: a time in Unix seconds.
ajv.addFormat('unixtime', { type: 'number', validate: Number.isInteger });
// An embedding's values: any JSON number (a float32 widened to a double).
ajv.addFormat('float', { type: 'number', validate: Number.isFinite });
// Annotations of the document and of the SDKs' generator: no validation keywords.
ajv.addVocabulary([
  'components',
  'example',
  'discriminator',
  'x-oaiMeta',
  'x-oaiTypeLabel',
  'x-oaiExpandable',
  'x-oaiSupportedSDKs',
  'x-stainless-const',
  'x-stainless-skip',
]);
ajv.addSchema({ components: { schemas } }, DOCUMENT_ID);

const describe = (what: string, errors: ErrorObject[] | null | undefined) =>
  (errors ?? []).map((error) => `${what}${error.instancePath} ${error.message ?? ''} ${JSON.stringify(error.params)}`);

/** The schemas the gateway's answers are checked against. */
export type OpenAISchema =
  | 'CreateChatCompletionResponse'
  | 'CreateChatCompletionStreamResponse'
  | 'Response'
  | 'ResponseStreamEvent'
  | 'ErrorResponse'
  | 'CreateEmbeddingResponse';

// The events of a stream, by their `type`: each is one branch of ResponseStreamEvent's anyOf,
// whose own errors say more than the anyOf's list of every branch's.
const eventSchemas = new Map(
  (schemas.ResponseStreamEvent as { anyOf: Array<{ $ref: string }> }).anyOf.map(({ $ref }) => {
    const type = (schemas[$ref.slice('#/components/schemas/'.length)] as { properties?: { type?: { enum?: string[] } } }).properties?.type?.enum?.[0];
    return [type, $ref] as const;
  }),
);

/**
 * What in `value` disagrees with OpenAI's schema `name`: an empty list when nothing does.
 * @example t.deepEqual(openAIProblems('Response', answer), [])
 */
export function openAIProblems(name: OpenAISchema, value: unknown): string[] {
  const validate = ajv.getSchema(`${DOCUMENT_ID}#/components/schemas/${name}`);
  if (validate === undefined) throw new Error(`no schema ${name}`);
  if (validate(value)) return [];
  const type = (value as { type?: unknown } | null)?.type;
  if (name === 'ResponseStreamEvent') {
    const branch = eventSchemas.get(typeof type === 'string' ? type : undefined);
    if (branch === undefined) return [`${name}: no event of type ${JSON.stringify(type)}`];
    const validateEvent = ajv.getSchema(`${DOCUMENT_ID}${branch}`);
    if (validateEvent !== undefined && !validateEvent(value)) return describe(`${name} ${String(type)}`, validateEvent.errors);
  }
  return describe(name, validate.errors);
}
