import { errors } from '../errors/gateway-error.js';

/**
 * Reads the fields of an upload form other than `file` (by name, every value sent): returns the
 * expiry asked for in seconds, null for none, and throws the 400 of a field it refuses. Fields it
 * does not know are ignored.
 */
export type UploadFields = (fields: ReadonlyMap<string, readonly string[]>) => number | null;

/** decisions.md: an expiry is 3,600 seconds through 30 days, in either shape. */
const MIN_EXPIRY_SECONDS = 3600;
const MAX_EXPIRY_SECONDS = 2_592_000;

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
 * `invalid_expires_after`).
 * @example pdfUpload({ uploadFields: () => openAIUploadFields })
 */
export const openAIUploadFields: UploadFields = (fields) => {
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
 * as OpenAI's expiry (400 `invalid_expires_after` otherwise).
 * @example pdfUpload({ uploadFields: () => anthropicUploadFields })
 */
export const anthropicUploadFields: UploadFields = (fields) => {
  const values = fields.get('expires_in_seconds');
  if (values === undefined) return null;
  const value = expirySeconds(values);
  if (value === undefined) throw errors.invalidExpiresInSeconds();
  return value;
};
