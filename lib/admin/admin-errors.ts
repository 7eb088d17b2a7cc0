import { GatewayError } from '../errors/gateway-error.js';

const invalid = (status: number, code: string, message: string) => new GatewayError(status, 'invalid_request_error', code, message);

/**
 * The admin API's own refusals, in Shape A like the rest.
 * @example throw adminErrors.keyNotFound()
 */
export const adminErrors = {
  /** No admin token, a malformed one, an API key, an unknown or revoked token, or no live session. */
  invalidAdminToken: () => new GatewayError(401, 'authentication_error', 'invalid_admin_token', 'Invalid admin token'),
  /** A session request that changes something without the session's `X-CSRF-Token`. */
  invalidCsrfToken: () => new GatewayError(403, 'permission_error', 'invalid_csrf_token', 'Missing or wrong X-CSRF-Token header'),
  /** A session opened from a session would outlive its own expiry. */
  tokenRequired: () => new GatewayError(403, 'permission_error', 'admin_token_required', 'A session is opened with the admin token itself, as a Bearer token'),
  /** `POST /sessions` where the operator turned the admin token's sign-in off (`tokenSignIn: false`). */
  tokenSignInDisabled: () =>
    new GatewayError(
      403,
      'permission_error',
      'token_sign_in_disabled',
      'Signing in to the dashboard with an admin token is turned off: sign in through the identity provider',
    ),
  /** A person's role does not allow the request (`adminRoles()`). */
  roleNotAllowed: (role: string) => new GatewayError(403, 'permission_error', 'role_not_allowed', `The role '${role}' may not do this`),
  userNotFound: () => invalid(404, 'user_not_found', 'User not found'),
  sessionNotFound: () => invalid(404, 'session_not_found', 'This request carries no session'),
  keyNotFound: () => invalid(404, 'key_not_found', 'Key not found'),
  keyNotActive: () => invalid(409, 'key_not_active', 'Only an active key can be rotated: this one is revoked or expired'),
  /** A rotation of a key that has a replacement already: a retried or repeated rotation makes no second key. */
  keyAlreadyRotated: () => invalid(409, 'key_already_rotated', 'This key was rotated already: rotate its replacement instead'),
  /** A request field that is missing or wrong: `field` is its path, as in `limits.tokens_per_day`. */
  invalidField: (field: string, problem: string) => invalid(400, `invalid_${field.split('.')[0]}`, `Invalid '${field}': ${problem}`),
  unknownField: (field: string) => invalid(400, 'unknown_field', `Unknown field '${field}'`),
} as const;
