import { isPrintableText } from '../printable-text.js';

/** The `error.type` values of Shape A (OpenAI-style) bodies. */
export type ErrorType = 'invalid_request_error' | 'authentication_error' | 'permission_error' | 'rate_limit_error' | 'server_error';

/**
 * The one error type of the gateway. Handlers and middleware throw it; only the formatters
 * (`openAIErrors`, `anthropicErrors`) turn it into a body. `expose` and `headers` follow Koa's
 * convention, so headers such as `retry-after` survive the error path. Prefer the `errors.*`
 * constructors, one per row of the API's error table.
 *
 * It is an answer, not a fault: it is made without the `Error` constructor, so a refusal pays for
 * no stack capture (`stack` is undefined; docs/DECISIONS.md, "Performance"). Its prototype inherits from
 * `Error.prototype`, so `instanceof Error` holds and loggers print it as an error, but
 * `util.types.isNativeError()` is false (AVA's `t.throws()` needs `any: true`). What failed
 * behind a 502, 503 or 504 is on `cause`.
 * @example throw new GatewayError(409, 'invalid_request_error', 'conflict', 'The file is being processed')
 */
export class GatewayError implements Error {
  declare readonly name: 'GatewayError';
  declare stack?: string;
  declare cause?: unknown;
  readonly expose = true;
  readonly message: string;
  readonly status: number;
  readonly type: ErrorType;
  readonly code: string;
  readonly headers: Record<string, string>;

  constructor(status: number, type: ErrorType, code: string, message: string, headers: Record<string, string> = {}) {
    this.message = message;
    this.status = status;
    this.type = type;
    this.code = code;
    this.headers = headers;
  }

  static {
    Object.setPrototypeOf(GatewayError.prototype, Error.prototype);
    Object.defineProperty(GatewayError.prototype, 'name', { value: 'GatewayError', configurable: true, writable: true });
  }
}

/**
 * Thrown by stores when their backend (database, Redis, disk) cannot be reached: answered 503.
 * `store` names the backend in the server's log.
 * @example if (!client.connected) throw new StoreUnavailableError('S3 is unreachable', { cause: err, store: 's3' })
 */
export class StoreUnavailableError extends Error {
  override readonly name = 'StoreUnavailableError';
  readonly store: string | undefined;
  constructor(message = 'store unavailable', options: ErrorOptions & { store?: string } = {}) {
    super(message, options);
    this.store = options.store;
  }
}

const invalid = (status: number, code: string, message: string) => new GatewayError(status, 'invalid_request_error', code, message);
const server = (status: number, code: string, message: string) => new GatewayError(status, 'server_error', code, message);
const rateLimited = (code: string, message: string, headers: Record<string, string>) => new GatewayError(429, 'rate_limit_error', code, message, headers);

/**
 * One constructor per row of api.md section 7 and decisions.md.
 * @example throw errors.fileNotFound()
 */
export const errors = {
  invalidApiKey: () => new GatewayError(401, 'authentication_error', 'invalid_api_key', 'Invalid API key'),
  forbidden: () => new GatewayError(403, 'permission_error', 'forbidden', 'Forbidden'),
  modelNotAllowed: (model: string) => new GatewayError(403, 'permission_error', 'forbidden', `Model '${model}' is not allowed for this API key`),
  /** Chat Completions, key without an allowlist, model not in the catalog. */
  modelDoesNotExist: (model: string) => invalid(404, 'model_not_found', `The model '${model}' does not exist`),
  /** Messages: unknown and disallowed models get this same body. */
  modelNotFound: () => invalid(404, 'model_not_found', 'Model not found'),
  fileNotFound: () => invalid(404, 'file_not_found', 'File not found'),
  invalidFileId: () => invalid(400, 'invalid_file_id', 'Invalid file ID'),
  fileTooLarge: () => invalid(413, 'file_too_large', 'File is too large'),
  requestTooLarge: () => invalid(413, 'request_too_large', 'Request body is too large'),
  invalidContentType: (expected: string) => invalid(400, 'invalid_content_type', `Request body must be ${expected}`),
  /** A body parser refused the body's charset or encoding. */
  unsupportedMediaType: () => invalid(415, 'unsupported_media_type', 'Unsupported request body encoding'),
  unsupportedContentEncoding: () => invalid(415, 'unsupported_content_encoding', 'Uploads must be sent uncompressed, without a Content-Encoding'),
  missingFile: () => invalid(400, 'missing_file', "Exactly one 'file' part is required"),
  invalidPurpose: () => invalid(400, 'invalid_purpose', "'purpose' must be 'user_data'"),
  invalidFileName: () => invalid(400, 'invalid_file_name', "The file name must end in '.pdf', be at most 255 bytes and hold no control characters"),
  invalidFileFormat: () => invalid(400, 'invalid_file_format', 'File is not a PDF'),
  invalidExpiresAfter: () =>
    invalid(
      400,
      'invalid_expires_after',
      "'expires_after[anchor]' must be 'created_at' and 'expires_after[seconds]' an integer from 3600 to 2592000, both or neither",
    ),
  /** Anthropic's upload form: its expiry field, with the same bounds. */
  invalidExpiresInSeconds: () => invalid(400, 'invalid_expires_after', "'expires_in_seconds' must be an integer from 3600 to 2592000"),
  /**
   * A field the upload form does not have, named when it prints as it reads; `instead` says what
   * the form takes in its place (the other shape's spelling of a field it has).
   */
  unknownUploadField: (name: string, instead?: string) =>
    invalid(
      400,
      'unknown_field',
      `${isPrintableText(name) && name.length <= 100 ? `Unknown field '${name}' in the upload form` : 'Unknown field in the upload form'}${instead === undefined ? '' : `: ${instead}`}`,
    ),
  invalidOrder: () => invalid(400, 'invalid_order', "'order' must be 'asc' or 'desc'"),
  invalidLimit: (max: number) => invalid(400, 'invalid_limit', `'limit' must be an integer from 1 to ${max}`),
  invalidJson: () => invalid(400, 'invalid_json', 'Request body must be valid JSON'),
  invalidRequest: (message: string) => invalid(400, 'invalid_request', message),
  /** A model with no known price, refused where a budget applies (`refuseUnpriced`): its calls would count nothing against it. */
  modelUnpriced: () => invalid(400, 'model_unpriced', 'The model has no known price: its calls are refused under a budget'),
  unknownUrl: (method: string, path: string) => invalid(404, 'unknown_url', `Unknown request URL: ${method} ${path}`),
  methodNotAllowed: (method: string) => invalid(405, 'method_not_allowed', `Method ${method} is not allowed on this URL`),
  createRateExceeded: (retryAfterSeconds: number) => rateLimited('rate_limit_exceeded', 'Create rate exceeded', { 'retry-after': String(retryAfterSeconds) }),
  ingestionQuotaExceeded: (retryAfterSeconds: number) =>
    rateLimited('ingestion_quota_exceeded', 'Ingestion quota exceeded', { 'retry-after': String(retryAfterSeconds) }),
  /** A key's limits on model calls refused the call: `limit` names the one, as `tokens per day`. */
  modelRateExceeded: (limit: 'requests per minute' | 'tokens per minute' | 'tokens per day', headers: Record<string, string>) =>
    rateLimited('rate_limit_exceeded', `Rate limit exceeded: ${limit}`, headers),
  storageQuotaExceeded: () => rateLimited('storage_quota_exceeded', 'Storage quota exceeded', { 'x-should-retry': 'false' }),
  internal: () => server(500, 'internal_error', 'Internal server error'),
  serviceUnavailable: () => server(503, 'service_unavailable', 'Service temporarily unavailable'),
  upstreamError: () => server(502, 'upstream_error', 'Upstream provider error'),
  upstreamTimeout: () => server(504, 'upstream_timeout', 'Upstream provider timed out'),
  /** An upstream's JSON answer, or one event of its stream, over the gateway's limit (`maxUpstreamBytes`): named, as the client cannot see it. */
  upstreamAnswerTooLarge: (limit: number) => server(502, 'upstream_error', `Upstream provider error: its answer is over the gateway's limit of ${limit} bytes`),
  /** The upstream has no such path (its 404 without an API error): not worth a retry. */
  upstreamPathNotFound: (provider: string, path: string) =>
    invalid(
      404,
      'upstream_path_not_found',
      `The provider '${provider}' has no POST ${path}: its upstream answered 404 Not Found there (an openai provider may declare the endpoints its upstream has)`,
    ),
  /** The upstream refused the request (400, 413, 422, 429): its status and message, our shape. */
  upstreamRefused: (status: number, code: string | undefined, message: string) =>
    new GatewayError(status, status === 429 ? 'rate_limit_error' : 'invalid_request_error', code ?? 'upstream_error', message),
} as const;
