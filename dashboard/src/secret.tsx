import { useRef, useState } from 'preact/hooks';
import type { NewKey } from './api.ts';
import { Modal } from './modal.tsx';

/** A new key's secret, shown this once, with a button that copies it. */
export function SecretDialog({ created, title, onClose }: { created: NewKey; title: string; onClose: () => void }) {
  const field = useRef<HTMLInputElement>(null);
  const [copied, setCopied] = useState<'yes' | 'no' | null>(null);
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(created.key);
      setCopied('yes');
    } catch {
      // No clipboard (a page served over plain HTTP to another host): select it for Ctrl+C.
      field.current?.select();
      setCopied('no');
    }
  };
  return (
    <Modal title={title} onClose={onClose}>
      <p>
        Key <code>{created.id}</code> for account <strong>{created.account}</strong>. Copy it now: it is shown only this once, and cannot be recovered.
      </p>
      <label for="secret">Secret key</label>
      <div class="secret">
        <input id="secret" ref={field} readonly value={created.key} onFocus={(event) => event.currentTarget.select()} />
        <button type="button" onClick={copy}>
          Copy
        </button>
      </div>
      <p class="hint" role="status">
        {copied === 'yes' && 'Copied to the clipboard.'}
        {copied === 'no' && 'The clipboard is not available here: the key is selected, press Ctrl+C.'}
      </p>
      <div class="actions">
        <button type="button" onClick={onClose}>
          Done
        </button>
      </div>
    </Modal>
  );
}
