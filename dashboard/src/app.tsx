import { useEffect, useState } from 'preact/hooks';
import { AccountsPage } from './accounts-page.tsx';
import { api, may, useSession, whenSignedOut, type Session } from './api.ts';
import { AuditPage } from './audit-page.tsx';
import { KeysPage } from './keys-page.tsx';
import { LogIn } from './log-in.tsx';
import { RequestsPage } from './requests-page.tsx';
import { UsagePage } from './usage-page.tsx';
import { UsersPage } from './users-page.tsx';

type Route = { page: 'keys' | 'audit' | 'requests' | 'people' } | { page: 'accounts' | 'usage'; account: string };

/** `text` decoded from an address; as it is when it is not well encoded (`50%`, typed by hand). */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

function readRoute(): Route {
  const [page, ...rest] = location.hash.replace(/^#\/?/, '').split('/');
  if (page === 'accounts' || page === 'usage') return { page, account: decoded(rest.join('/')) };
  if (page === 'audit' || page === 'requests' || page === 'people') return { page };
  return { page: 'keys' };
}

/** Where the page for `account` is: the account is part of the address, so it can be shared and reloaded. */
export const accountHref = (account: string) => `#/accounts/${encodeURIComponent(account)}`;

export function App() {
  const [session, setSession] = useState<Session | null | undefined>(undefined);
  const [ended, setEnded] = useState(false);
  const [route, setRoute] = useState(readRoute);

  useEffect(() => {
    const onHash = () => setRoute(readRoute());
    addEventListener('hashchange', onHash);
    whenSignedOut(() => {
      setEnded(true);
      setSession(null);
    });
    api.currentSession().then(setSession, () => setSession(null));
    return () => removeEventListener('hashchange', onHash);
  }, []);
  useSession(session ?? null);

  if (session === undefined)
    return (
      <p class="boot" aria-busy="true">
        Loading the dashboard…
      </p>
    );
  if (session === null) {
    return (
      <LogIn
        ended={ended}
        onLoggedIn={(opened) => {
          setEnded(false);
          setSession(opened);
        }}
      />
    );
  }

  const logOut = async () => {
    await api.logOut().catch(() => undefined);
    // A person who signed in through the provider signs out there too (RP-initiated logout).
    const provider = session.user ? await api.oidc() : null;
    if (provider) window.location.assign(provider.logout_url);
    else setSession(null);
  };
  return (
    <>
      <header class="topbar">
        <span class="brand">koa-model-gateway</span>
        <nav aria-label="Dashboard">
          <a href="#/keys" aria-current={route.page === 'keys' ? 'page' : undefined}>
            Keys
          </a>
          <a href="#/accounts/" aria-current={route.page === 'accounts' ? 'page' : undefined}>
            Accounts
          </a>
          <a href="#/usage/" aria-current={route.page === 'usage' ? 'page' : undefined}>
            Usage
          </a>
          <a href="#/requests" aria-current={route.page === 'requests' ? 'page' : undefined}>
            Requests
          </a>
          <a href="#/audit" aria-current={route.page === 'audit' ? 'page' : undefined}>
            Audit log
          </a>
          {may('people') && (
            <a href="#/people" aria-current={route.page === 'people' ? 'page' : undefined}>
              People
            </a>
          )}
        </nav>
        <span class="who">
          {session.user ? (
            <>
              <span class="who-label">Signed in as </span>
              <strong title={session.user.id}>{session.user.name ?? session.user.email}</strong> <span class="badge role">{session.role}</span>
            </>
          ) : session.admin_token_name === null ? (
            <>
              Signed in with <code>{session.admin_token_id}</code>
            </>
          ) : (
            <>
              Signed in as <strong title={session.admin_token_id ?? undefined}>{session.admin_token_name}</strong>
            </>
          )}
        </span>
        <button type="button" class="secondary" onClick={logOut}>
          Log out
        </button>
      </header>
      <main>
        {route.page === 'keys' && <KeysPage />}
        {route.page === 'accounts' && <AccountsPage account={route.account} />}
        {route.page === 'usage' && <UsagePage account={route.account} />}
        {route.page === 'requests' && <RequestsPage />}
        {route.page === 'audit' && <AuditPage />}
        {route.page === 'people' && may('people') && <UsersPage />}
      </main>
    </>
  );
}
