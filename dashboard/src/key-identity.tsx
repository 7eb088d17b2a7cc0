import type { ApiKey } from './api.ts';

/** What tells a key apart in the list: its name, its id and the last four characters of its secret. */
export function KeyIdentity({ apiKey, prefix }: { apiKey: ApiKey; prefix: string | undefined }) {
  return (
    <>
      {apiKey.name !== null && <strong class="key-name">{apiKey.name}</strong>}
      <code>{apiKey.id}</code>
      {apiKey.hint !== null && (
        <span class="secret-hint" title="The last four characters of the secret">
          <code>
            {prefix === undefined ? '' : `${prefix}_sk_`}…{apiKey.hint}
          </code>
        </span>
      )}
    </>
  );
}

/** The links of a rotation: which key replaced this one, and which one it replaced; each finds that key in the list. */
export function RotationLinks({ apiKey, onFind }: { apiKey: ApiKey; onFind: (id: string) => void }) {
  const link = (label: string, id: string) => (
    <span class="rotation">
      {label}{' '}
      <button type="button" class="link" onClick={() => onFind(id)} aria-label={`${label} ${id}: show it`}>
        <code>{id}</code>
      </button>
    </span>
  );
  return (
    <>
      {apiKey.replaced_by !== null && link('replaced by', apiKey.replaced_by.id)}
      {apiKey.replaces !== null && link('replaces', apiKey.replaces.id)}
    </>
  );
}
