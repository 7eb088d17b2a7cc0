import type { Knex } from 'knex';

type Migration = Knex.Migration & { name: string };

/** Every table of the gateway, in order. Kept in code so the migrations ship inside dist/. */
const MIGRATIONS: Migration[] = [
  {
    name: '001_api_keys',
    async up(knex) {
      await knex.schema.createTable('kmg_api_keys', (table) => {
        table.increments('seq').primary(); // creation order
        table.string('id', 64).notNullable().unique();
        table.string('account', 255).notNullable().index();
        table.string('hash', 64).notNullable().unique();
        table.text('scopes').notNullable(); // JSON array
        table.text('models'); // JSON array, null: every model
        table.bigInteger('created_at').notNullable();
        table.bigInteger('expires_at');
        table.bigInteger('revoked_at');
      });
    },
    async down(knex) {
      await knex.schema.dropTable('kmg_api_keys');
    },
  },
];

const migrationSource: Knex.MigrationSource<Migration> = {
  getMigrations: async () => MIGRATIONS,
  getMigrationName: (migration) => migration.name,
  getMigration: async (migration) => migration,
};

/**
 * Brings the database to the latest schema of the Knex stores. Safe to call at every start and
 * from several processes at once (Knex takes a migration lock).
 * @example await migrate(knex)
 */
export async function migrate(knex: Knex): Promise<void> {
  await knex.migrate.latest({ migrationSource, tableName: 'kmg_migrations' });
}
