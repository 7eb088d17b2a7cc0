import { useEffect, useState } from 'preact/hooks';
import { ApiError } from './api.ts';

/** A list read a page at a time, newest first: the first page, then older ones on demand. */
export type KeysetList<Item> = { state: 'loading' } | { state: 'error'; message: string } | { state: 'ready'; items: Item[]; next: string | null };

const failure = (err: unknown) => (err instanceof ApiError ? err.message : 'Something went wrong.');

/**
 * The pages of a keyset-paged admin list (`{ data, next_cursor }`): the first page loaded again
 * whenever `filters` change or `retry()` is called, `loadOlder()` adding the next page after the
 * last one read, and `older` telling whether that is under way or failed.
 */
export function useKeysetPages<Item, Filters>(
  filters: Filters,
  loadPage: (filters: Filters, cursor: string | null) => Promise<{ data: Item[]; next_cursor: string | null }>,
) {
  const [list, setList] = useState<KeysetList<Item>>({ state: 'loading' });
  const [older, setOlder] = useState<{ busy: boolean; message: string | null }>({ busy: false, message: null });
  const [attempt, setAttempt] = useState(0);

  useEffect(() => {
    let current = true;
    setList({ state: 'loading' });
    loadPage(filters, null).then(
      (page) => current && setList({ state: 'ready', items: page.data, next: page.next_cursor }),
      (err: unknown) => current && setList({ state: 'error', message: failure(err) }),
    );
    return () => {
      current = false;
    };
  }, [filters, attempt]);

  const loadOlder = async () => {
    if (list.state !== 'ready' || list.next === null) return;
    setOlder({ busy: true, message: null });
    try {
      const page = await loadPage(filters, list.next);
      setList({ state: 'ready', items: [...list.items, ...page.data], next: page.next_cursor });
      setOlder({ busy: false, message: null });
    } catch (err) {
      setOlder({ busy: false, message: failure(err) });
    }
  };
  return { list, older, loadOlder, retry: () => setAttempt(attempt + 1) };
}

/** The button that reads the next, older page of a list of `what` (`calls`, `actions`), and why it failed. */
export function ShowOlder({ pages, what }: { pages: ReturnType<typeof useKeysetPages<unknown, unknown>>; what: string }) {
  const { list, older, loadOlder } = pages;
  return (
    <>
      {list.state === 'ready' && list.next !== null && (
        <p>
          <button type="button" class="secondary" onClick={loadOlder} disabled={older.busy}>
            {older.busy ? 'Loading…' : `Show older ${what}`}
          </button>
        </p>
      )}
      {older.message !== null && (
        <p class="error" role="alert">
          Older {what} could not be loaded: {older.message}
        </p>
      )}
    </>
  );
}
