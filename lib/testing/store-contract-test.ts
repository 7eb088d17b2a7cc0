import type { ContractAssertions } from './provider-contract.js';

/** What a thrown error must be: a part of AVA's `throwsAsync` expectations. */
export interface ThrowsExpectation {
  instanceOf?: new (...args: never[]) => Error;
  message?: string | RegExp;
}

/** The same, for an error that need not be a native `Error` (a `GatewayError` captures no stack). */
export interface ThrowsAnyExpectation {
  any: true;
  instanceOf?: new (...args: never[]) => unknown;
  message?: string | RegExp;
}

/**
 * The assertions the store contract suites use: a part of AVA's `t` (any test runner's context of
 * this shape will do). `throwsAsync` resolves to the error it caught.
 */
export interface StoreAssertions extends ContractAssertions {
  false(actual: unknown, message?: string): unknown;
  truthy(actual: unknown, message?: string): unknown;
  not(actual: unknown, expected: unknown, message?: string): unknown;
  like(actual: unknown, selector: Record<string, unknown>, message?: string): unknown;
  regex(actual: string, pattern: RegExp, message?: string): unknown;
  fail(message?: string): never;
  throwsAsync(promise: Promise<unknown>, expectation?: ThrowsExpectation, message?: string): Promise<unknown>;
  throwsAsync(promise: Promise<unknown>, expectation: ThrowsAnyExpectation, message?: string): Promise<unknown>;
  notThrowsAsync(promise: Promise<unknown>, message?: string): Promise<unknown>;
  /** Runs `cleanup` once the test has ended, passed or failed. */
  teardown(cleanup: () => unknown): void;
}

/**
 * A test runner's `test(title, implementation)`, as AVA's default export is one: every store
 * suite takes it, so that the package needs no test runner at run time.
 *
 * @example
 * import test from 'ava';
 * import { keyStoreContract } from 'koa-model-gateway/testing';
 * keyStoreContract(test, 'my store', async () => new MyKeyStore());
 */
export type StoreContractTest = (title: string, implementation: (t: StoreAssertions) => Promise<void>) => void;
