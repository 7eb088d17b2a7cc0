/**
 * The Knex stores keep every time in a bigint column, which PostgreSQL refuses a fraction for
 * (SQLite takes it as given). A `Date.now() / 1000` or `performance` clock gives fractions, so
 * each time is made whole where it meets a column. Stored times are whole, so flooring the `now`
 * they are compared with changes no answer: `expires_at > now` holds exactly when
 * `expires_at > floor(now)`.
 */
export const wholeSeconds = Math.floor;

/** Unix ms of a record, to the millisecond it falls in. */
export const wholeMs = Math.floor;

/** A lower bound (`time >= since`), rounded up so that it still lets exactly the same times through. */
export const wholeLowerBound = Math.ceil;
