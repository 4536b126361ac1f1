// Path routing with the History API; the server answers every route with index.html.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { name: 'home' }
  | { name: 'session'; id: string; /** #seq-N: the event to show (a search hit). */ seq?: number }
  /** The old "compare with parent" address: redirects to the diff of the parent and this session. */
  | { name: 'compare'; id: string }
  /** Two sessions of one tree side by side from their common ancestor. */
  | { name: 'diff'; a: string; b: string };

export function parseRoute(pathname: string, hash = ''): Route {
  // A deep link to an event, #/s/<id>/e/<seq>: the whole route in the hash, so it works from any path.
  const deep = /^#\/s\/([^/]+)(?:\/e\/(\d+))?\/?$/.exec(hash);
  if (deep) return deep[2] === undefined ? { name: 'session', id: decodeURIComponent(deep[1]) } : { name: 'session', id: decodeURIComponent(deep[1]), seq: Number(deep[2]) };
  const diff = /^\/compare\/([^/]+)\/([^/]+)\/?$/.exec(pathname);
  if (diff) return { name: 'diff', a: decodeURIComponent(diff[1]), b: decodeURIComponent(diff[2]) };
  const m = pathname.match(/^\/sessions\/([^/]+)(\/compare)?\/?$/);
  if (!m) return { name: 'home' };
  const id = decodeURIComponent(m[1]);
  if (m[2]) return { name: 'compare', id };
  const seq = /^#seq-(\d+)$/.exec(hash);
  return seq ? { name: 'session', id, seq: Number(seq[1]) } : { name: 'session', id };
}

export const sessionPath = (id: string) => `/sessions/${encodeURIComponent(id)}`;
/** The diff of two sessions (left, right) from their common ancestor. */
export const diffPath = (a: string, b: string) => `/compare/${encodeURIComponent(a)}/${encodeURIComponent(b)}`;
/** A session opened at one event (search hits link there). */
export const eventPath = (id: string, seq: number) => `${sessionPath(id)}#seq-${seq}`;
/** The shareable deep link to one event (both panes scroll to it and highlight it). */
export const eventDeepLink = (id: string, seq: number) => `${location.origin}/#/s/${encodeURIComponent(id)}/e/${seq}`;

const ROUTE_CHANGED = 'forkline:route';

export function navigate(path: string) {
  if (path === location.pathname + location.hash) return;
  history.pushState(null, '', path);
  dispatchEvent(new Event(ROUTE_CHANGED));
}

/** Replaces the current address (a redirect: Back skips it). */
export function redirect(path: string) {
  history.replaceState(null, '', path);
  dispatchEvent(new Event(ROUTE_CHANGED));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname, location.hash));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.pathname, location.hash));
    addEventListener('popstate', update);
    addEventListener('hashchange', update); // a deep link pasted into the address bar of an open page
    addEventListener(ROUTE_CHANGED, update);
    return () => {
      removeEventListener('popstate', update);
      removeEventListener('hashchange', update);
      removeEventListener(ROUTE_CHANGED, update);
    };
  }, []);
  return route;
}

/** Plain links that navigate without reloading (modifier clicks open tabs as usual). */
export function onLinkClick(e: MouseEvent) {
  const a = (e.currentTarget as HTMLAnchorElement | null) ?? null;
  if (!a || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
  e.preventDefault();
  navigate(a.getAttribute('href') ?? '/');
}
