import { useEffect, useState } from 'preact/hooks';
import { api } from './api.ts';

/** The accounts that have keys, sorted, to pick from; none while loading or when the list cannot be had. */
export function useKnownAccounts(): string[] {
  const [known, setKnown] = useState<string[]>([]);
  useEffect(() => {
    api.keys('').then(
      (keys) => setKnown([...new Set(keys.map((key) => key.account))].sort()),
      () => setKnown([]),
    );
  }, []);
  return known;
}
