import { errors } from '../errors/gateway-error.js';

/**
 * Reads the fields of an upload form other than `file` (by name, every value sent): returns the
 * expiry asked for in seconds, null for none, and throws the 400 of a field it refuses, a field
 * it does not know included (nothing a client sends is dropped silently).
 */
export type UploadFields = (fields: ReadonlyMap<string, readonly string[]>) => number | null;

/** decisions.md: an expiry is 3,600 seconds through 30 days, in either shape. */
const MIN_EXPIRY_SECONDS = 3600;
const MAX_EXPIRY_SECONDS = 2_592_000;

/** Every field besides `file` (checked on its own) must be one of `known`; the other shape's expiry is named as such. */
function refuseUnknownFields(
  fields: ReadonlyMap<string, readonly string[]>,
  known: readonly string[],
  otherShape: { fields: readonly string[]; instead: string },
): void {
  for (const name of fields.keys()) {
    if (name === 'file' || known.includes(name)) continue;
    throw errors.unknownUploadField(name, otherShape.fields.includes(name) ? otherShape.instead : undefined);
  }
}

const OPENAI_EXPIRY = ['expires_after[anchor]', 'expires_after[seconds]'];
const ANTHROPIC_EXPIRY = ['expires_in_seconds'];

/** The one value of an integer field within the expiry bounds, or undefined. */
function expirySeconds(values: readonly string[]): number | undefined {
  const [value, ...more] = values;
  if (value === undefined || more.length > 0 || !/^[0-9]{1,10}$/.test(value)) return undefined;
  const seconds = Number(value);
  return seconds >= MIN_EXPIRY_SECONDS && seconds <= MAX_EXPIRY_SECONDS ? seconds : undefined;
}

/**
 * OpenAI's upload form (api.md section 4): `purpose` must be `user_data` (400 `invalid_purpose`),
 * `expires_after[anchor]` (`created_at`) and `expires_after[seconds]` both or neither (400
 * `invalid_expires_after`); any other field, Anthropic's `expires_in_seconds` included, 400 `unknown_field`.
 * @example pdfUpload({ uploadFields: () => openAIUploadFields })
 */
export const openAIUploadFields: UploadFields = (fields) => {
  refuseUnknownFields(fields, ['purpose', ...OPENAI_EXPIRY], {
    fields: ANTHROPIC_EXPIRY,
    instead: "an upload in OpenAI's shape sets its expiry with 'expires_after[anchor]' and 'expires_after[seconds]'",
  });
  const purpose = fields.get('purpose');
  if (purpose?.length !== 1 || purpose[0] !== 'user_data') throw errors.invalidPurpose();
  const anchor = fields.get('expires_after[anchor]');
  const seconds = fields.get('expires_after[seconds]');
  if (anchor === undefined && seconds === undefined) return null;
  const value = expirySeconds(seconds ?? []);
  if (anchor?.length !== 1 || anchor[0] !== 'created_at' || value === undefined) throw errors.invalidExpiresAfter();
  return value;
};

/**
 * Anthropic's upload form: no `purpose`; an optional `expires_in_seconds`, within the same bounds
 * as OpenAI's expiry (400 `invalid_expires_after` otherwise); any other field, OpenAI's `purpose`
 * and `expires_after[…]` included, 400 `unknown_field`.
 * @example pdfUpload({ uploadFields: () => anthropicUploadFields })
 */
export const anthropicUploadFields: UploadFields = (fields) => {
  refuseUnknownFields(fields, ANTHROPIC_EXPIRY, {
    fields: OPENAI_EXPIRY,
    instead: "an upload in Anthropic's shape (with anthropic-version) sets its expiry with 'expires_in_seconds'",
  });
  const values = fields.get('expires_in_seconds');
  if (values === undefined) return null;
  const value = expirySeconds(values);
  if (value === undefined) throw errors.invalidExpiresInSeconds();
  return value;
};
