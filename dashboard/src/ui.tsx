import type { ComponentChildren } from 'preact';
import { formatTime } from './format.ts';

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

/** What is being loaded, told to screen readers as busy. */
export function Loading({ what }: { what: string }) {
  return (
    <p class="muted" aria-busy="true">
      Loading {what}…
    </p>
  );
}

/** A load that failed, read out as it appears, with a way to try again. */
export function LoadFailed({ what, message, onRetry }: { what: string; message: string; onRetry: () => void }) {
  return (
    <p class="error" role="alert">
      {what} could not be loaded: {message}{' '}
      <button type="button" class="link" onClick={onRetry}>
        Try again
      </button>
    </p>
  );
}

/**
 * A Unix time as `formatTime` writes it, in a `<time>`: a narrow column wraps it between the day
 * and the hour, never inside the day.
 */
export function Time({ seconds }: { seconds: number | null }) {
  if (seconds === null) return <>{formatTime(null)}</>;
  const [day, hour] = formatTime(seconds).split(' ');
  return (
    <time dateTime={new Date(seconds * 1000).toISOString()}>
      <span class="day">{day}</span> {hour}
    </time>
  );
}
