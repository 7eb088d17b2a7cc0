import type { TestFn } from 'ava';
import nock from 'nock';

/**
 * nock stands in for the upstreams. Its interceptors are process-global, so a file that uses it
 * runs its tests serially, reaches no network but our own loopback servers, and drops after each
 * test what that test left. Call it after the file's top-level awaits: AVA wants every hook
 * declared at once.
 */
export function mockUpstreams(test: TestFn<unknown>): void {
  nock.disableNetConnect();
  nock.enableNetConnect('127.0.0.1');
  test.afterEach.always(() => {
    nock.cleanAll();
  });
}
