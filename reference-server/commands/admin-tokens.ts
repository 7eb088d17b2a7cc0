import { ADMIN_TOKEN_NAME_RULE, canonicalAdminTokenName, createAdminToken } from 'koa-model-gateway/admin';
import { KnexAdminTokenStore } from 'koa-model-gateway/stores/knex';
import { loadConfigWithModules } from '../config.js';
import { describeStore, storeLine } from '../store-description.js';
import { recordCliAction } from './audit.js';
import { UsageError, isoTime, parseCommand, withDatabase, type CommandIo } from './command-line.js';

async function adminTokensCreate(args: string[], io: CommandIo): Promise<number> {
  const { values } = parseCommand(args, { name: { type: 'string' } }, 0);
  // An empty --name is no name.
  const given = values.name?.trim() ?? '';
  const name = given === '' ? null : (canonicalAdminTokenName(given) ?? null);
  if (given !== '' && name === null) throw new UsageError(`--name ${ADMIN_TOKEN_NAME_RULE}`);
  const config = await loadConfigWithModules(io.env);
  const { token, record } = await withDatabase(config, async (database) => {
    const created = await createAdminToken(new KnexAdminTokenStore(database.knex, database.storeOptions), { prefix: config.gateway.keyPrefix, name });
    await recordCliAction(database, { action: 'admin_token.created', tokenId: created.record.id, fields: name === null ? [] : ['name'] }, io);
    return created;
  });
  const store = describeStore(config.database);
  if (values.json) {
    io.out(JSON.stringify({ id: record.id, token, store }));
  } else {
    io.err(storeLine(store));
    io.out(
      [
        `Created admin token ${record.id}${name === null ? '' : ` (${name})`}`,
        '',
        token,
        '',
        'This is the only time the token is shown: store it now. It opens /admin/v1 and the dashboard at /dashboard.',
      ].join('\n'),
    );
  }
  return 0;
}

async function adminTokensList(args: string[], io: CommandIo): Promise<number> {
  const { values } = parseCommand(args, {}, 0);
  const config = await loadConfigWithModules(io.env);
  const records = await withDatabase(config, ({ knex, storeOptions }) => new KnexAdminTokenStore(knex, storeOptions).list());
  if (values.json) {
    io.out(JSON.stringify(records.map((record) => ({ id: record.id, name: record.name, created_at: record.createdAt, revoked_at: record.revokedAt }))));
    return 0;
  }
  if (records.length === 0) io.out('No admin tokens.');
  for (const record of records) {
    const status = record.revokedAt === null ? 'active' : 'revoked';
    io.out(`${record.id}  ${status}  created ${isoTime(record.createdAt)}  ${record.name ?? ''}`.trimEnd());
  }
  return 0;
}

async function adminTokensRevoke(args: string[], io: CommandIo): Promise<number> {
  const { values, positionals } = parseCommand(args, {}, 1);
  const id = positionals[0] as string;
  const config = await loadConfigWithModules(io.env);
  const revoked = await withDatabase(config, async (database) => {
    if (!(await new KnexAdminTokenStore(database.knex, database.storeOptions).revoke(id))) return false;
    await recordCliAction(database, { action: 'admin_token.revoked', tokenId: id }, io);
    return true;
  });
  if (!revoked) {
    io.err(`koa-model-gateway: no admin token with id '${id}'`);
    return 1;
  }
  io.out(values.json ? JSON.stringify({ id, revoked: true }) : `Revoked ${id}`);
  return 0;
}

/** `admin-tokens create|list|revoke`: the tokens of the admin API and the dashboard. */
export async function adminTokensCommand([sub, ...args]: string[], io: CommandIo): Promise<number> {
  if (sub === 'create') return adminTokensCreate(args, io);
  if (sub === 'list') return adminTokensList(args, io);
  if (sub === 'revoke') return adminTokensRevoke(args, io);
  throw new UsageError(sub === undefined ? 'admin-tokens needs a subcommand: create, list or revoke' : `unknown admin-tokens subcommand '${sub}'`);
}
