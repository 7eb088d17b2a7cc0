import { useEffect, useState } from 'preact/hooks';
import { api, ApiError, type OidcProvider, type Session } from './api.ts';
import { ErrorAlert } from './ui.tsx';

/** The admin token goes to the server once, to open a session; the page keeps it nowhere. */
export function LogIn({ ended, onLoggedIn }: { ended: boolean; onLoggedIn: (session: Session) => void }) {
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  // undefined: still asking the server; null: no identity provider.
  const [provider, setProvider] = useState<OidcProvider | null | undefined>(undefined);
  useEffect(() => {
    void api.oidc().then(setProvider);
  }, []);
  const tokenSignIn = provider?.token_sign_in !== false;

  const submit = async (event: Event) => {
    event.preventDefault();
    setBusy(true);
    setError(null);
    try {
      const session = await api.logIn(token.trim());
      setToken('');
      onLoggedIn(session);
    } catch (err) {
      setError(err instanceof ApiError && err.status === 401 ? 'That admin token was not accepted.' : (err as Error).message);
    } finally {
      setBusy(false);
    }
  };

  return (
    <main class="login">
      <form class="card" onSubmit={submit} aria-labelledby="login-title">
        <h1 id="login-title">koa-model-gateway</h1>
        <p class="muted">{provider ? 'Sign in to manage keys and see accounts.' : 'Log in with an admin token to manage keys and see accounts.'}</p>
        {ended && (
          <p class="notice" role="status">
            Your session has ended. Log in again to go on.
          </p>
        )}
        {provider && (
          <a class="button sso" href={provider.login_url}>
            Sign in with {provider.name}
          </a>
        )}
        {provider && tokenSignIn && <p class="divider">or, break-glass, with an admin token</p>}
        {tokenSignIn && <TokenFields token={token} setToken={setToken} busy={busy} error={error} />}
      </form>
    </main>
  );
}

/** The break-glass sign-in: an admin token, sent once to open a session. */
function TokenFields({ token, setToken, busy, error }: { token: string; setToken: (token: string) => void; busy: boolean; error: string | null }) {
  return (
    <>
      <label for="token">Admin token</label>
      <input
        id="token"
        type="password"
        autocomplete="off"
        spellcheck={false}
        required
        value={token}
        onInput={(event) => setToken(event.currentTarget.value)}
        aria-describedby="token-help"
      />
      <p id="token-help" class="hint">
        Create one on the server with
        <code class="command">npm run -s gateway -- admin-tokens create</code>
      </p>
      <ErrorAlert message={error} />
      <button type="submit" disabled={busy || token.trim() === ''}>
        {busy ? 'Logging in…' : 'Log in'}
      </button>
    </>
  );
}
