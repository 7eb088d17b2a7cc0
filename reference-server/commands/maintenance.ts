import { loadConfigWithModules } from '../config.js';
import { describeDatabase, openMigratedDatabase } from '../database.js';
import { openStores, sweepDeployment } from '../deployment.js';
import { parseCommand, type CommandIo } from './command-line.js';

/** `migrate`: brings the database to the latest schema. */
export async function migrateCommand(args: string[], io: CommandIo): Promise<number> {
  const { values } = parseCommand(args, {}, 0);
  const config = await loadConfigWithModules(io.env);
  await (await openMigratedDatabase(config.database)).close();
  const database = describeDatabase(config.database);
  io.out(values.json ? JSON.stringify({ database, migrated: true }) : `${database} is at the latest schema`);
  return 0;
}

/** `sweep`: removes expired files, orphaned blobs, stale uploads and usage past its retention now. */
export async function sweepCommand(args: string[], io: CommandIo): Promise<number> {
  const { values } = parseCommand(args, {}, 0);
  const config = await loadConfigWithModules(io.env);
  const stores = await openStores(config);
  let result;
  try {
    result = await sweepDeployment(config, stores);
  } finally {
    await stores.close();
  }
  io.out(
    values.json
      ? JSON.stringify(result)
      : `Removed ${result.expired} expired file(s), ${result.orphans} orphaned blob(s), ${result.staleUploads} stale upload(s) and ${result.usageRows} usage row(s) past their retention`,
  );
  return 0;
}
