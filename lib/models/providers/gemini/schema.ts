import { isObject, type JsonObject } from '../../content.js';
import { untranslatable } from '../../formats/neutral.js';

// Gemini takes a tool's parameters and an answer's schema in its own subset of OpenAPI's Schema
// object (ai.google.dev/api/caching#Schema). A JSON schema is rewritten into it where the rewrite
// keeps its meaning, and refused, naming the keyword, where it would not.

/** Keywords Gemini's Schema has, taken as they are (`properties`, `items`, `anyOf` and `$ref` are rewritten apart). */
const KEPT = new Set([
  'type',
  'format',
  'title',
  'description',
  'nullable',
  'enum',
  'maxItems',
  'minItems',
  'required',
  'minProperties',
  'maxProperties',
  'minLength',
  'maxLength',
  'pattern',
  'example',
  'default',
  'minimum',
  'maximum',
  'propertyOrdering',
]);

/** Keywords that describe a schema without constraining what it accepts: left out. */
const ANNOTATIONS = new Set(['$schema', '$id', '$comment', 'examples', 'deprecated', 'readOnly', 'writeOnly', 'contentMediaType', 'contentEncoding']);

/** The `format`s Gemini knows, by type; any other is an annotation (JSON Schema asserts no format), left out. */
const FORMATS: Readonly<Record<string, readonly string[]>> = { string: ['enum', 'date-time'], number: ['float', 'double'], integer: ['int32', 'int64'] };

const TYPES = new Set(['string', 'number', 'integer', 'boolean', 'array', 'object', 'null']);

/**
 * `schema` in Gemini's subset: annotations (`$schema`, `examples`, ...) and `additionalProperties`
 * left out (Gemini's objects have only the properties they list), `const` as a one-value `enum`, a
 * `type` list with `null` as `nullable`, `oneOf` as `anyOf`, local `$ref`s inlined. Anything else
 * is refused (400), naming `where` and the keyword.
 * @example geminiSchema({ type: 'object', properties: { city: { type: ['string', 'null'] } }, additionalProperties: false }, 'tools[0]', 'Gemini')
 */
export function geminiSchema(schema: JsonObject, where: string, target: string): JsonObject {
  const definitions = { ...(isObject(schema.$defs) ? schema.$defs : {}), ...(isObject(schema.definitions) ? schema.definitions : {}) };
  const refuse = (path: string, keyword: string) => untranslatable(`${where}${path}.${keyword}`, target);

  const rewrite = (node: JsonObject, path: string, seen: readonly string[]): JsonObject => {
    if (typeof node.$ref === 'string') {
      const name = /^#\/(?:\$defs|definitions)\/([^/]+)$/.exec(node.$ref)?.[1];
      const target = name === undefined ? undefined : definitions[name];
      // A recursive schema has no finite inlining: Gemini's Schema has no references.
      if (name === undefined || !isObject(target) || seen.includes(name)) throw refuse(path, '$ref');
      const merged: JsonObject = { ...target, ...node };
      delete merged.$ref;
      return rewrite(merged, path, [...seen, name]);
    }
    const out: JsonObject = {};
    for (const [keyword, value] of Object.entries(node)) {
      if (ANNOTATIONS.has(keyword) || keyword === '$defs' || keyword === 'definitions' || keyword === 'additionalProperties') continue;
      switch (keyword) {
        case 'type':
          Object.assign(
            out,
            typeOf(value, () => refuse(path, 'type')),
          );
          break;
        case 'const':
          if (typeof value !== 'string') throw refuse(path, 'const');
          out.enum = [value];
          break;
        case 'enum':
          if (!Array.isArray(value) || !value.every((item) => typeof item === 'string')) throw refuse(path, 'enum');
          out.enum = value;
          break;
        case 'properties':
          if (!isObject(value)) throw refuse(path, 'properties');
          out.properties = Object.fromEntries(
            Object.entries(value).map(([name, property]) => {
              if (!isObject(property)) throw refuse(`${path}.properties`, name);
              return [name, rewrite(property, `${path}.properties.${name}`, seen)];
            }),
          );
          break;
        case 'items':
          if (!isObject(value)) throw refuse(path, 'items');
          out.items = rewrite(value, `${path}.items`, seen);
          break;
        case 'anyOf':
        case 'oneOf':
          if (!Array.isArray(value) || !value.every(isObject)) throw refuse(path, keyword);
          // Exactly one of branches that cannot both match is any of them: a model writes one value.
          out.anyOf = value.map((branch, index) => rewrite(branch as JsonObject, `${path}.${keyword}[${index}]`, seen));
          break;
        case 'format':
          if (typeof value === 'string' && FORMATS[String(node.type)]?.includes(value)) out.format = value;
          break;
        default:
          if (!KEPT.has(keyword)) throw refuse(path, keyword);
          out[keyword] = value;
      }
    }
    return out;
  };
  return rewrite(schema, '', []);
}

/** A JSON schema's `type` as Gemini's: one type, `nullable` for a list with `null`. */
function typeOf(value: unknown, refuse: () => Error): JsonObject {
  if (typeof value === 'string' && TYPES.has(value) && value !== 'null') return { type: value };
  if (!Array.isArray(value)) throw refuse();
  const types = value.filter((type) => type !== 'null');
  if (types.length !== 1 || typeof types[0] !== 'string' || !TYPES.has(types[0])) throw refuse();
  return { type: types[0], ...(types.length < value.length && { nullable: true }) };
}
