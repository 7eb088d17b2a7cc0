// A key (`<prefix>_sk_<secret>`) or an admin token (`<prefix>_admin_<secret>`) as the gateway makes
// them: the secret is 43 base64url characters; a shorter run is taken too, for one cut short.
const SECRET = /[A-Za-z0-9]+_(?:sk|admin)_[A-Za-z0-9_-]{16,}/g;

/**
 * `text` with every API key or admin token in it replaced by `[secret]`: what a client put where it
 * does not belong (a request path, a user agent) is logged and traced without it. Text without
 * `_sk_` or `_admin_` is returned as it is, unscanned.
 * @example logger.info({ path: withoutSecrets(ctx.path) }, 'request')
 */
export function withoutSecrets(text: string): string {
  return text.includes('_sk_') || text.includes('_admin_') ? text.replace(SECRET, '[secret]') : text;
}
