import type { StoreContractTest } from './store-contract-test.js';
import type { KeyChanges } from '../auth/key-changes.js';

/** Two ends of one feed, as two processes sharing a backend hold them. */
export interface KeyChangesPair {
  publisher: KeyChanges;
  subscriber: KeyChanges;
  /** Whether the feed tells which key changed; one that does not calls its listeners without an id. */
  carriesIds: boolean;
}

/** A listener that records what it hears, and `calls(n)`: a promise that it has been called n times. */
export function recorder() {
  const heard: Array<string | undefined> = [];
  let wake: () => void = () => {};
  const listener = (id?: string) => {
    heard.push(id);
    wake();
  };
  /** Resolves once the listener has been called `count` times in all, or already has; rejects after 5 s. */
  const calls = (count: number) =>
    new Promise<void>((resolve, reject) => {
      if (heard.length >= count) return resolve();
      const timer = setTimeout(() => reject(new Error(`heard ${heard.length} of ${count} calls within 5 s`)), 5000);
      wake = () => {
        if (heard.length < count) return;
        clearTimeout(timer);
        resolve();
      };
    });
  return { heard, listener, calls };
}

/** The behaviour every KeyChanges must have; run once per implementation. */
export function keyChangesContract(test: StoreContractTest, name: string, makePair: () => Promise<KeyChangesPair>): void {
  test(`${name}: a listener is called once listening has begun, then with each change published at the other end`, async (t) => {
    const { publisher, subscriber, carriesIds } = await makePair();
    const { heard, listener, calls } = recorder();
    t.teardown(subscriber.subscribe(listener));
    await calls(1);
    t.deepEqual(heard, [undefined]);
    await publisher.publish('key_one');
    await calls(2);
    t.deepEqual(heard, [undefined, carriesIds ? 'key_one' : undefined]);
  });

  test(`${name}: a listener subscribed later hears that it is listening too, and an unsubscribed one hears nothing more`, async (t) => {
    const { publisher, subscriber } = await makePair();
    const first = recorder();
    const second = recorder();
    const stopFirst = subscriber.subscribe(first.listener);
    await first.calls(1);
    t.teardown(subscriber.subscribe(second.listener));
    await second.calls(1);
    stopFirst();
    await publisher.publish('key_two');
    await second.calls(2);
    t.is(first.heard.length, 1);
  });
}
