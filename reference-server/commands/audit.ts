import { userInfo } from 'node:os';
import { auditEntry, type AuditEvent } from 'koa-model-gateway/admin';
import { KnexAuditStore } from 'koa-model-gateway/stores/knex';
import type { CommandIo } from './command-line.js';
import type { Database } from '../database.js';

/** The operating system's user running the command, or `null` where there is none (a container's uid without a name). */
function osUser(): string | null {
  try {
    // As long as an audit entry keeps a name.
    return userInfo().username.slice(0, 255) || null;
  } catch {
    return null;
  }
}

/**
 * Records a change the command line made in the audit log, with who = `cli` and the OS user. The
 * change is made already: an entry that cannot be written is a warning, not a failed command.
 */
export async function recordCliAction(database: Database, event: AuditEvent, io: CommandIo): Promise<void> {
  const entry = auditEntry(event, { actor: { type: 'cli', id: null, name: osUser() }, at: Math.floor(Date.now() / 1000), address: null });
  try {
    await new KnexAuditStore(database.knex, database.storeOptions).append(entry);
  } catch (err) {
    io.err(`koa-model-gateway: warning: done, but not recorded in the audit log (${(err as Error).message})`);
  }
}
