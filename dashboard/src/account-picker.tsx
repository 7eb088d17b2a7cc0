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

interface AccountPickerProps {
  id: string;
  /** The account shown now; the field starts with it. */
  account: string;
  known: string[];
  /** The button's text. */
  action: string;
  /** Where an account's page is: the form goes there. */
  href: (account: string) => string;
  /** Shown in the empty field when an empty name means every account; without it a name is required. */
  everyAccount?: string;
}

/** An account name typed or picked from those with keys, then its page opened: the account is in the address. */
export function AccountPicker({ id, account, known, action, href, everyAccount }: AccountPickerProps) {
  const [name, setName] = useState(account);
  useEffect(() => setName(account), [account]);
  const show = (event: Event) => {
    event.preventDefault();
    location.hash = href(name.trim());
  };
  return (
    <form class="toolbar" onSubmit={show} role="search">
      <label for={id}>Account</label>
      <input
        id={id}
        required={everyAccount === undefined}
        placeholder={everyAccount}
        value={name}
        onInput={(event) => setName(event.currentTarget.value)}
        list={`${id}-known`}
      />
      <datalist id={`${id}-known`}>
        {known.map((known) => (
          <option key={known} value={known} />
        ))}
      </datalist>
      <button type="submit" class="secondary">
        {action}
      </button>
    </form>
  );
}
