import type { ComponentChildren } from 'preact';

/** A refusal or failure, read out by screen readers as it appears; nothing when there is none. */
export function ErrorAlert({ message }: { message: string | null }) {
  if (message === null) return null;
  return (
    <p class="error" role="alert">
      {message}
    </p>
  );
}

/** A form's or dialog's buttons: Cancel, then the action. */
export function Actions({ onCancel, children }: { onCancel: () => void; children: ComponentChildren }) {
  return (
    <div class="actions">
      <button type="button" class="secondary" onClick={onCancel}>
        Cancel
      </button>
      {children}
    </div>
  );
}
