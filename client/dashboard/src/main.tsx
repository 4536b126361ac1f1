// The forkline dashboard: sessions tree on the left, the routed page on the right.
import { render } from 'preact';
import { useState } from 'preact/hooks';
import { setToken, tokens } from './api.ts';
import { ReplaceTokenDialog } from './dialogs.tsx';
import { CompareRedirect, DiffPage } from './compare.tsx';
import { DASHBOARD_LINKS, LocationProvider, useRoute } from './router.ts';
import { SessionPage } from './session-page.tsx';
import { ForkPointPage } from './fork-point-page.tsx';
import { FamilyPage } from './family-page.tsx';
import { Sidebar, useSessions } from './sessions.tsx';
import { Frame } from './drawer.tsx';
import { BadLinkNotice } from './widgets.tsx';
import { ConnectionBanner } from './connection-banner.tsx';
import './styles.css';
import './layout.css';

function App() {
  const route = useRoute();
  const { sessions, error, loaded, add } = useSessions();
  const currentId = route.name === 'home' || route.name === 'not-found' ? undefined : route.name === 'diff' ? route.b : route.id;
  const [offered, setOffered] = useState(tokens.offered);
  return (
    <Frame
      closeOn={location.pathname + location.hash}
      sidebar={<Sidebar sessions={sessions} error={error} loaded={loaded} currentId={currentId} onImported={add} />}
    >
      <ConnectionBanner />
      {offered && tokens.stored && (
        <ReplaceTokenDialog stored={tokens.stored} offered={offered} onReplace={() => setToken(offered)} onKeep={() => setOffered(undefined)} />
      )}
      {route.name === 'not-found' && (
        <main id="main" tabIndex={-1} class="home">
          <h1>No such page</h1>
          <p class="error" role="alert" data-testid="bad-link">
            The dashboard has no page at {route.path}. Pick a session on the left.
          </p>
        </main>
      )}
      {route.name === 'session' && <SessionPage key={route.id} id={route.id} seq={route.seq} onCreated={add} />}
      {route.name === 'compare' && <CompareRedirect key={`compare-${route.id}`} id={route.id} />}
      {route.name === 'diff' && <DiffPage key={`diff-${route.a}-${route.b}`} a={route.a} b={route.b} />}
      {route.name === 'fork-point' && <ForkPointPage key={`forks-${route.id}-${route.seq}`} id={route.id} seq={route.seq} />}
      {route.name === 'family' && <FamilyPage key={`family-${route.id}`} id={route.id} />}
      {route.name === 'home' && (
        <main id="main" tabIndex={-1} class="home">
          <BadLinkNotice />
          <h1>Sessions</h1>
          <p class="muted">
            Pick a session on the left, or import a recording (JSON Lines, format V3 or V4). Each session is an append-only event log: fork it at any event,
            branch from a completed turn, and continue the child with a message.
          </p>
        </main>
      )}
    </Frame>
  );
}

render(
  <LocationProvider scope={DASHBOARD_LINKS}>
    <App />
  </LocationProvider>,
  document.getElementById('app')!,
);
