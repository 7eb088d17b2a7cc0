/**
 * Calls `probe` every `intervalMs` until `done` accepts its value, `attempts` times at most, and
 * resolves with the last value: for states a test cannot await an event for (another process's
 * state, a client's reconnection).
 */
export async function until<T>(probe: () => Promise<T>, done: (value: T) => boolean, { intervalMs = 20, attempts = 500 } = {}): Promise<T> {
  let value = await probe();
  for (let attempt = 1; attempt < attempts && !done(value); attempt++) {
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
    value = await probe();
  }
  return value;
}
