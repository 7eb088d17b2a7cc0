import test from 'ava';
import { isFileId, newFileId } from '../../lib/files/file-id.js';

// Each test file runs in a process of its own: the ids issued here are the only ones of this process.

// Sorting strings of ASCII compares their bytes.
const byteOrder = (ids: string[]) => [...ids].sort();
let horizon = 2_000_000_000_000;
/** A time in ms later than that of every id this file has asked for, with room for 100,000 ms after it. */
const unusedTime = () => (horizon += 100_000);
/** Ids asked for one after another, one per time in `times` (Unix seconds). */
const idsAt = (times: number[]) => times.map((seconds) => newFileId(seconds));

// Ids issued before the id had milliseconds, at 2025-01-01, 2026-09-21 and 2038-01-19 (the last
// second of that format's `0`): the creation second in 6 characters, then 26 random ones.
const FIRST_FORMAT = ['file-0bS7L-JcRpzmNvEljOGwmIBxw1_mwdgj', 'file-0egIi-VitEwPGD7KhKIop21FI_86dIkU', 'file-0zzzzzWXsUfuu9-3LZTQZtTNj7FdKsS1'];

test('ids of the first format stay valid and sort before every new id', (t) => {
  const fresh = newFileId(Date.now() / 1000);
  t.true(isFileId(fresh));
  for (const old of FIRST_FORMAT) {
    t.true(isFileId(old), old);
    t.true(old < fresh, old);
  }
  t.true(FIRST_FORMAT.every((old) => old < newFileId(1_000_000_000)), 'even for a new id of a time before theirs');
});

test('ids asked for in a tight loop are strictly increasing and all different', (t) => {
  const ids = Array.from({ length: 20_000 }, () => newFileId(Date.now() / 1000));
  t.true(ids.every(isFileId));
  for (let i = 1; i < ids.length; i++) {
    if (!((ids[i - 1] as string) < (ids[i] as string))) t.fail(`id ${i} does not follow id ${i - 1}`);
  }
  t.is(new Set(ids).size, ids.length);
});

test('the time part has millisecond resolution: ids one millisecond apart sort by time, whatever the order asked', (t) => {
  const base = unusedTime();
  const first = newFileId((base + 1) / 1000);
  const second = newFileId((base + 2) / 1000);
  t.true(first < second);
  t.true(first.startsWith('file-1'), 'the mark of the millisecond format');
  t.not(first.slice(6, 14), second.slice(6, 14), 'the time characters differ by one millisecond');
  t.is(first.slice(6, 13), second.slice(6, 13), 'only in the last time character');
});

test('an id asked for with a time before the last one still sorts after it (a clock that stepped back)', (t) => {
  const time = unusedTime();
  const later = newFileId(time / 1000);
  const earlier = newFileId((time - 500) / 1000);
  t.true(later < earlier);
  t.is(earlier.slice(0, 14), later.slice(0, 14), 'it keeps the time of the last id');
});

test('decisions.md Files: ids carry 138 random bits: each of the last 23 characters takes every value', (t) => {
  // Ids of different milliseconds, so that each random part is drawn afresh.
  const start = unusedTime();
  const ids = idsAt(Array.from({ length: 2000 }, (_, i) => (start + i) / 1000));
  t.deepEqual(ids, byteOrder(ids));
  for (let position = 14; position < 37; position++) {
    const seen = new Set(ids.map((id) => id[position]));
    // 2,000 draws of a uniform character from 64 miss one with probability below 1e-11.
    t.is(seen.size, 64, `position ${position} takes every character`);
  }
});

test('ids within one millisecond are not the last one plus one: the step is random too', (t) => {
  const ms = unusedTime();
  const ids = idsAt(Array.from({ length: 200 }, () => ms / 1000));
  t.deepEqual(ids, byteOrder(ids));
  t.true(ids.every((id) => id.slice(0, 14) === ids[0]?.slice(0, 14)), 'all of that millisecond');
  // A step of 1 leaves characters 27 to 32 (bits 24 to 59 of the random part) as they were but
  // once in 2^24 ids; a random 64-bit step changes them but once in 2^40.
  for (let i = 1; i < ids.length; i++) {
    t.not(ids[i]?.slice(27, 33), ids[i - 1]?.slice(27, 33), `id ${i}`);
  }
});

test('a time no id can carry is refused', (t) => {
  for (const seconds of [-1, Number.NaN, Number.POSITIVE_INFINITY, 64 ** 8 / 1000]) {
    t.throws(() => newFileId(seconds), { instanceOf: RangeError }, String(seconds));
  }
});
