import test from 'ava';
import { randomAlphanumeric } from '../lib/random.js';

const ALPHANUMERIC = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

test('randomAlphanumeric gives the asked length of [A-Za-z0-9]', (t) => {
  for (const length of [0, 1, 16, 24, 5000]) t.regex(randomAlphanumeric(length), new RegExp(`^[A-Za-z0-9]{${length}}$`));
});

test('every character is equally likely (no modulo bias)', (t) => {
  const counts = new Map<string, number>();
  const text = randomAlphanumeric(62 * 4000);
  for (const char of text) counts.set(char, (counts.get(char) ?? 0) + 1);
  t.is(counts.size, 62);
  const expected = text.length / 62;
  let chiSquare = 0;
  for (const char of ALPHANUMERIC) chiSquare += ((counts.get(char) ?? 0) - expected) ** 2 / expected;
  // 61 degrees of freedom: above 140 happens by chance far less than once in a million runs;
  // mapping every byte modulo 62 (8 characters 25 % more likely) gives about 1,600.
  t.true(chiSquare < 140, `chi-square ${chiSquare.toFixed(1)}`);
});
