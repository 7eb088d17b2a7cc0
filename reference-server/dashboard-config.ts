import { z } from 'zod';
import { ADMIN_ROLES, issuerUrl, type AdminRole } from 'koa-model-gateway/admin';
import { nonEmptyString, positiveInteger, settingsObject, timerSeconds } from 'koa-model-gateway/settings';
import { ConfigError } from './config-error.js';

type Environment = Readonly<Record<string, string | undefined>>;

const ENV_NAME = 'must name an environment variable (letters, digits and _)';
const ROLE = `must be one of ${ADMIN_ROLES.join(', ')}`;

/**
 * The `dashboard` section of the `GATEWAY_CONFIG` file: who signs in and for how long. The
 * client's secret is never in the file: `oidc.clientSecretEnv` names the variable that holds it.
 */
export const dashboardFileSchema = settingsObject({
  /** The gateway's address as browsers reach it (`https://gateway.example.com`): the OIDC redirect URL is made from it. */
  publicUrl: z.string().optional(),
  /** A session's lifetime from sign-in. Default 28,800 (8 hours). */
  sessionSeconds: positiveInteger.default(28_800),
  /** A session unused this long ends; 0: never. Default 3600. */
  idleSeconds: timerSeconds.default(3600),
  /** Whether an admin token may sign in to the dashboard (break-glass). Default true. */
  tokenSignIn: z.boolean({ error: 'must be true or false' }).default(true),
  oidc: settingsObject({
    issuer: nonEmptyString,
    clientId: nonEmptyString,
    clientSecretEnv: z
      .string({ error: ENV_NAME })
      .regex(/^[A-Za-z_][A-Za-z0-9_]*$/, { error: ENV_NAME })
      .optional(),
    providerName: nonEmptyString.optional(),
    /** The ID token's claim with the person's groups. Default `groups`. */
    roleClaim: nonEmptyString.optional(),
    /** Group → role; without it, a group named as a role gives that role. */
    roles: z.record(z.string(), z.enum(ADMIN_ROLES, { error: ROLE })).optional(),
  }).optional(),
}).prefault({});

export type DashboardFileSettings = z.output<typeof dashboardFileSchema>;

/** How the dashboard's people sign in, the file's settings with the environment's over them. */
export interface DashboardSettings {
  sessionSeconds: number;
  idleSeconds: number;
  tokenSignIn: boolean;
  /** Set when an OIDC provider is configured. */
  oidc: {
    issuer: string;
    clientId: string;
    clientSecret?: string;
    providerName: string;
    /** The fixed callback: PUBLIC_URL + /admin/v1/oidc/callback. */
    redirectUri: string;
    roles: { claim?: string; map?: Record<string, AdminRole> };
  } | null;
}

function readSeconds(name: string, raw: string | undefined, fallback: number, min: number): number {
  if (raw === undefined || raw === '') return fallback;
  if (!/^\d+$/.test(raw) || Number(raw) < min || Number(raw) > 2_147_483)
    throw new ConfigError(`${name} must be an integer of seconds from ${min} to 2147483, got '${raw}'`);
  return Number(raw);
}

function readBoolean(name: string, raw: string | undefined, fallback: boolean): boolean {
  if (raw === undefined || raw === '') return fallback;
  if (raw === 'true' || raw === 'false') return raw === 'true';
  throw new ConfigError(`${name} must be true or false, got '${raw}'`);
}

/** `OIDC_ROLES`: `group=role` pairs, comma-separated (`gw-admins=admin,gw-ops=operator`). */
function readRoleMap(raw: string): Record<string, AdminRole> {
  const map: Record<string, AdminRole> = {};
  for (const pair of raw
    .split(',')
    .map((part) => part.trim())
    .filter(Boolean)) {
    const at = pair.lastIndexOf('=');
    const group = pair.slice(0, at).trim();
    const role = pair.slice(at + 1).trim();
    if (at < 1 || !ADMIN_ROLES.includes(role as AdminRole)) throw new ConfigError(`OIDC_ROLES must be group=role pairs separated by commas, each role ${ROLE}`);
    map[group] = role as AdminRole;
  }
  return map;
}

/**
 * The dashboard's settings: `PUBLIC_URL`, `OIDC_ISSUER`, `OIDC_CLIENT_ID`, `OIDC_CLIENT_SECRET`,
 * `OIDC_PROVIDER_NAME`, `OIDC_ROLE_CLAIM`, `OIDC_ROLES`, `DASHBOARD_TOKEN_SIGN_IN`,
 * `SESSION_SECONDS`, `SESSION_IDLE_SECONDS`, each over the file's `dashboard` section. Throws a
 * `ConfigError` naming the bad setting; never repeats a secret.
 */
export function dashboardSettings(file: DashboardFileSettings, env: Environment): DashboardSettings {
  const settings = {
    sessionSeconds: readSeconds('SESSION_SECONDS', env.SESSION_SECONDS, file.sessionSeconds, 1),
    idleSeconds: readSeconds('SESSION_IDLE_SECONDS', env.SESSION_IDLE_SECONDS, file.idleSeconds, 0),
    tokenSignIn: readBoolean('DASHBOARD_TOKEN_SIGN_IN', env.DASHBOARD_TOKEN_SIGN_IN, file.tokenSignIn),
  };
  const issuer = env.OIDC_ISSUER || file.oidc?.issuer;
  if (!issuer) return { ...settings, oidc: null };
  try {
    issuerUrl(issuer);
  } catch {
    throw new ConfigError('OIDC_ISSUER must be an https:// URL (http:// only on a loopback address: 127.0.0.1, [::1], localhost)');
  }
  const clientId = env.OIDC_CLIENT_ID || file.oidc?.clientId;
  if (!clientId) throw new ConfigError('OIDC_CLIENT_ID must be set with OIDC_ISSUER');
  const publicUrl = env.PUBLIC_URL || file.publicUrl;
  if (!publicUrl || !URL.canParse(publicUrl) || !['http:', 'https:'].includes(new URL(publicUrl).protocol)) {
    throw new ConfigError("PUBLIC_URL must be the gateway's http:// or https:// address as browsers reach it, for the OIDC redirect URL");
  }
  const secretEnv = file.oidc?.clientSecretEnv;
  const clientSecret = env.OIDC_CLIENT_SECRET || (secretEnv === undefined ? undefined : env[secretEnv]);
  if (secretEnv !== undefined && !env.OIDC_CLIENT_SECRET && !clientSecret) {
    throw new ConfigError(`dashboard.oidc: the environment variable ${secretEnv} (its clientSecretEnv) is not set`);
  }
  const claim = env.OIDC_ROLE_CLAIM || file.oidc?.roleClaim;
  const map = env.OIDC_ROLES ? readRoleMap(env.OIDC_ROLES) : file.oidc?.roles;
  return {
    ...settings,
    oidc: {
      issuer,
      clientId,
      ...(clientSecret && { clientSecret }),
      providerName: env.OIDC_PROVIDER_NAME || file.oidc?.providerName || 'your identity provider',
      redirectUri: new URL('/admin/v1/oidc/callback', publicUrl).href,
      roles: { ...(claim && { claim }), ...(map && { map }) },
    },
  };
}
