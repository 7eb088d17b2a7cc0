/**
 * A configuration the server cannot start with. Its message is the one line printed before the
 * process exits: it names the setting and what is wrong, never a secret.
 */
export class ConfigError extends Error {
  override readonly name = 'ConfigError';
}
