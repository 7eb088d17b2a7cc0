import type { Knex } from 'knex';
import { DAY_MS } from '../../usage/usage-rollups.js';

/**
 * On PostgreSQL `kmg_usage` is partitioned by range of `time`, one partition per UTC day
 * (`kmg_usage_p20261207`), and a default partition for the records of a day that has none (a clock
 * far off, a sweep that has not run for days). Retention drops a day's partition whole; the sweep
 * makes the partitions of the days ahead. SQLite keeps one table.
 */
const PARENT = 'kmg_usage';
const DEFAULT_PARTITION = 'kmg_usage_default';
const NAME = /^kmg_usage_p(\d{4})(\d{2})(\d{2})$/;

/** The days after today whose partitions are made before they begin. */
export const USAGE_PARTITION_DAYS_AHEAD = 3;

/** 'kmgP': the advisory lock of partition changes, per schema: one instance at a time makes or drops them. */
const PARTITIONS_LOCK = 0x6b6d6750;

/** No statement here waits longer than this for a lock on the table the calls write: it tries again at the next sweep. */
const LOCK_TIMEOUT = "set local lock_timeout = '100ms'";

const dayStart = (time: number) => time - (((time % DAY_MS) + DAY_MS) % DAY_MS);
const partitionName = (day: number) => `kmg_usage_p${new Date(day).toISOString().slice(0, 10).replaceAll('-', '')}`;

/** False for a lock not granted within the lock timeout (SQLSTATE 55P03): the work is left to the next call. */
function skipLockTimeout(err: unknown): false {
  if ((err as { code?: string }).code !== '55P03') throw err;
  return false;
}

/** The day partitions of `kmg_usage`, by the Unix ms their day begins at. */
async function dayPartitions(knex: Knex): Promise<Map<number, string>> {
  const { rows } = (await knex.raw('select c.relname as name from pg_inherits i join pg_class c on c.oid = i.inhrelid where i.inhparent = to_regclass(?)', [
    PARENT,
  ])) as { rows: Array<{ name: string }> };
  const days = new Map<number, string>();
  for (const { name } of rows) {
    const date = NAME.exec(name);
    if (date) days.set(Date.UTC(Number(date[1]), Number(date[2]) - 1, Number(date[3])), name);
  }
  return days;
}

/** Runs `work` in a transaction that holds the partitions' lock, waiting for an instance that holds it. */
async function withPartitionsLock(knex: Knex, work: (trx: Knex.Transaction) => Promise<void>): Promise<void> {
  await knex.transaction(async (trx) => {
    await trx.raw('select pg_advisory_xact_lock(?, hashtext(current_schema()))', [PARTITIONS_LOCK]);
    await trx.raw(LOCK_TIMEOUT);
    await work(trx);
  });
}

/**
 * Makes the partitions of the days from `now`'s to `USAGE_PARTITION_DAYS_AHEAD` after it that are
 * missing, each in a transaction of its own, and resolves to how many it made. A day's records
 * already in the default partition move into its new partition. Safe from several instances at
 * once: one makes each, the others wait for it, then find it made.
 */
export async function addUsagePartitions(knex: Knex, now: number): Promise<number> {
  const today = dayStart(now);
  const wanted = Array.from({ length: USAGE_PARTITION_DAYS_AHEAD + 1 }, (_, index) => today + index * DAY_MS);
  const existing = await dayPartitions(knex);
  let made = 0;
  for (const day of wanted.filter((day) => !existing.has(day))) {
    const added = withPartitionsLock(knex, async (trx) => {
      if ((await dayPartitions(trx)).has(day)) return;
      const name = partitionName(day);
      const range = [day, day + DAY_MS];
      // Attached rather than created as a partition: attaching locks out no insert or read of kmg_usage.
      await trx.raw(`create table ${name} (like ${PARENT} including defaults)`);
      // Direct on the partitions, so no trigger adds the records to the roll-ups again.
      await trx.raw(`lock table ${DEFAULT_PARTITION} in exclusive mode`);
      await trx.raw(`insert into ${name} select * from ${DEFAULT_PARTITION} where time >= ? and time < ?`, range);
      await trx.raw(`delete from ${DEFAULT_PARTITION} where time >= ? and time < ?`, range);
      await trx.raw(`alter table ${PARENT} attach partition ${name} for values from (${day}) to (${day + DAY_MS})`);
      made += 1;
    });
    // A report reading the default partition holds the move off: the next sweep makes it.
    if (!(await added.then(() => true, skipLockTimeout))) break;
  }
  return made;
}

/**
 * Drops the partitions of the days that end at or before `before`, oldest first, each in a
 * transaction of its own, and resolves to the records they held by PostgreSQL's estimate
 * (`reltuples`, counting them would read them all). A drop that would wait past the lock timeout
 * for a query on `kmg_usage` is left to the next call.
 */
export async function dropUsagePartitions(knex: Knex, before: number): Promise<number> {
  const old = [...(await dayPartitions(knex)).entries()].filter(([day]) => day + DAY_MS <= before).sort(([a], [b]) => a - b);
  let dropped = 0;
  for (const [, name] of old) {
    const drop = withPartitionsLock(knex, async (trx) => {
      const { rows } = (await trx.raw('select reltuples from pg_class where oid = to_regclass(?)', [name])) as { rows: Array<{ reltuples: number }> };
      if (rows[0] === undefined) return;
      await trx.raw(`drop table ${name}`);
      dropped += Math.max(Math.round(rows[0].reltuples), 0);
    });
    if (!(await drop.then(() => true, skipLockTimeout))) break;
  }
  return dropped;
}

/**
 * The migration: `kmg_usage` becomes partitioned, its records carried over (the roll-ups already
 * hold them), with a partition per day from its oldest record's to `USAGE_PARTITION_DAYS_AHEAD`
 * after `now`'s. Its key becomes (time, seq), as a partitioned table's key holds the partition's column.
 */
export async function partitionUsage(knex: Knex, now: number): Promise<void> {
  const old = 'kmg_usage_unpartitioned';
  const { rows } = (await knex.raw(`select min(time) as oldest from ${PARENT}`)) as { rows: Array<{ oldest: string | null }> };
  await setAside(knex, old);
  await knex.raw(`create table ${PARENT} (like ${old} including defaults) partition by range (time)`);
  await knex.raw(`create table ${DEFAULT_PARTITION} partition of ${PARENT} default`);
  const today = dayStart(now);
  const oldest = rows[0]?.oldest;
  // Records from before the last 400 days (more than any retention keeps them) stay in the default partition.
  const first = oldest === null || oldest === undefined ? today : Math.min(today, Math.max(dayStart(Number(oldest)), today - 400 * DAY_MS));
  for (let day = first; day <= today + USAGE_PARTITION_DAYS_AHEAD * DAY_MS; day += DAY_MS) {
    await knex.raw(`create table ${partitionName(day)} partition of ${PARENT} for values from (${day}) to (${day + DAY_MS})`);
  }
  // Indexes after the copy: built once per partition rather than row by row.
  await knex.raw(`insert into ${PARENT} select * from ${old}`);
  await knex.raw(`alter table ${PARENT} add constraint kmg_usage_pkey primary key (time, seq)`);
  await knex.raw(`create index kmg_usage_account_time_index on ${PARENT} (account, time)`);
  await knex.raw(`create index kmg_usage_key_id_time_index on ${PARENT} (key_id, time)`);
  await takeOver(knex, old);
}

/** The migration back: one table again, its key `seq`. */
export async function unpartitionUsage(knex: Knex): Promise<void> {
  const old = 'kmg_usage_partitioned';
  await setAside(knex, old);
  await knex.raw(`create table ${PARENT} (like ${old} including defaults)`);
  await knex.raw(`insert into ${PARENT} select * from ${old}`);
  await knex.raw(`alter table ${PARENT} add constraint kmg_usage_pkey primary key (seq)`);
  await knex.raw(`create index kmg_usage_account_time_index on ${PARENT} (account, time)`);
  await knex.raw(`create index kmg_usage_key_id_time_index on ${PARENT} (key_id, time)`);
  await knex.raw(`create index kmg_usage_time_index on ${PARENT} (time)`);
  await takeOver(knex, old);
}

/** Renames `kmg_usage` to `name`, without its trigger, key and indexes, whose names the new table takes. */
async function setAside(knex: Knex, name: string): Promise<void> {
  await knex.raw(`alter table ${PARENT} rename to ${name}`);
  await knex.raw(`drop trigger kmg_usage_roll_up on ${name}`);
  await knex.raw(`alter table ${name} drop constraint kmg_usage_pkey`);
  const { rows } = (await knex.raw('select indexname from pg_indexes where schemaname = current_schema() and tablename = ?', [name])) as {
    rows: Array<{ indexname: string }>;
  };
  for (const { indexname } of rows) await knex.raw('drop index ??', [indexname]);
}

/** The new `kmg_usage` takes the sequence of `seq` over from the old table, which goes (the migration adds the trigger again). */
async function takeOver(knex: Knex, old: string): Promise<void> {
  const { rows } = (await knex.raw('select pg_get_serial_sequence(?, ?) as sequence', [old, 'seq'])) as { rows: Array<{ sequence: string }> };
  await knex.raw(`alter sequence ${rows[0]?.sequence} owned by ${PARENT}.seq`);
  await knex.raw(`drop table ${old} cascade`);
}
