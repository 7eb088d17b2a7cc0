/**
 * A preload (`node --import`) that throws an exception nothing catches in `serve`'s server thread,
 * the process's first worker thread (threadId 1; the SQLite writer comes later), as it starts.
 */
import { threadId } from 'node:worker_threads';

if (threadId === 1) {
  setTimeout(() => {
    throw new Error('thrown by the test');
  }, 0);
}
