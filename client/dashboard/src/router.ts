// The dashboard's addresses, routed by preact-iso: its LocationProvider keeps
// the path (History API, Back/Forward) and turns clicks on the dashboard's own
// links into navigations; its `exec` matches the path patterns. The server
// answers every route with index.html.
//
// preact-iso routes the path and the query only, so the two addresses that
// live in the hash (an event deep link, a search hit's #seq-N) are read here,
// and a hash change (a deep link pasted into an open page) re-renders too.
import { useEffect, useReducer } from 'preact/hooks';
import { exec, useLocation } from 'preact-iso/router';

export { LocationProvider } from 'preact-iso/router';

export type Route =
  | { name: 'home' }
  /** A path the dashboard has no page for (said so, not the home page). */
  | { name: 'not-found'; path: string }
  | { name: 'session'; id: string; /** #seq-N: the event to show (a search hit). */ seq?: number }
  /** The old "compare with parent" address: redirects to the diff of the parent and this session. */
  | { name: 'compare'; id: string }
  /** Two sessions of one tree side by side from their common ancestor. */
  | { name: 'diff'; a: string; b: string }
  /** The children forked at one seq of a session (a fan-out's variants) side by side. */
  | { name: 'fork-point'; id: string; seq: number }
  /** A session's fork tree: its root and every fork below it. */
  | { name: 'family'; id: string };

const SESSION = '/sessions/:id';
const COMPARE = '/sessions/:id/compare';
const DIFF = '/compare/:a/:b';
const FORK_POINT = '/sessions/:id/forks/:seq';
const FAMILY = '/sessions/:id/family';
/** The links LocationProvider routes without a reload; any other (GraphiQL, /recordings) loads as usual. */
export const DASHBOARD_LINKS = /^\/(?:$|[?#]|sessions\/|compare\/)/;

export function parseRoute(pathname: string, hash = ''): Route {
  // A deep link to an event, #/s/<id>/e/<seq>: the whole route in the hash, so it works from any path.
  const deep = /^#\/s\/([^/]+)(?:\/e\/(\d+))?\/?$/.exec(hash);
  if (deep)
    return deep[2] === undefined
      ? { name: 'session', id: decodeURIComponent(deep[1]) }
      : { name: 'session', id: decodeURIComponent(deep[1]), seq: Number(deep[2]) };
  const diff = exec(pathname, DIFF);
  if (diff) return { name: 'diff', a: diff.params.a!, b: diff.params.b! };
  const forkPoint = exec(pathname, FORK_POINT);
  if (forkPoint && /^\d+$/.test(forkPoint.params.seq!)) return { name: 'fork-point', id: forkPoint.params.id!, seq: Number(forkPoint.params.seq) };
  const family = exec(pathname, FAMILY);
  if (family) return { name: 'family', id: family.params.id! };
  const compare = exec(pathname, COMPARE);
  if (compare) return { name: 'compare', id: compare.params.id! };
  const session = exec(pathname, SESSION);
  if (!session) return pathname === '/' || pathname === '' ? { name: 'home' } : { name: 'not-found', path: pathname };
  const id = session.params.id!;
  const seq = /^#seq-(\d+)$/.exec(hash);
  return seq ? { name: 'session', id, seq: Number(seq[1]) } : { name: 'session', id };
}

/**
 * What is wrong with an address's hash when it is one of the dashboard's
 * forms (`#/s/<id>/e/<seq>`, `#seq-N`, `#files-N[:path]`) but malformed;
 * null for a well-formed one or any other hash (`#main`, the skip link's).
 */
export function badHash(hash: string): string | null {
  if (hash.startsWith('#/') && !/^#\/s\/[^/]+(?:\/e\/\d+)?\/?$/.test(hash))
    return `${hash} is not a link to a session or an event (#/s/<id> or #/s/<id>/e/<seq>)`;
  if (hash.startsWith('#seq-') && !/^#seq-\d+$/.test(hash)) return `${hash} is not an event number (#seq-<seq>)`;
  if (hash.startsWith('#files-') && !/^#files-\d+(?::.*)?$/.test(hash)) return `${hash} is not a files link (#files-<seq> or #files-<seq>:<path>)`;
  return null;
}

export const sessionPath = (id: string) => `/sessions/${encodeURIComponent(id)}`;
/** The diff of two sessions (left, right) from their common ancestor. */
export const diffPath = (a: string, b: string) => `/compare/${encodeURIComponent(a)}/${encodeURIComponent(b)}`;
/** The children forked at event `seq` of a session, side by side. */
export const forkPointPath = (id: string, seq: number) => `${sessionPath(id)}/forks/${seq}`;
/** A session's fork tree. */
export const familyPath = (id: string) => `${sessionPath(id)}/family`;
/** A session opened at one event (search hits link there). */
export const eventPath = (id: string, seq: number) => `${sessionPath(id)}#seq-${seq}`;
/** The shareable deep link to one event (both panes scroll to it and highlight it). */
export const eventDeepLink = (id: string, seq: number) => `${location.origin}/#/s/${encodeURIComponent(id)}/e/${seq}`;

/**
 * Tells LocationProvider the address changed: it reads `location` again on a
 * popstate, as after Back. (Its own `route()` is reachable only from inside
 * components; these are called from handlers after an await too.)
 */
const moved = () => dispatchEvent(new PopStateEvent('popstate'));

export function navigate(path: string) {
  if (path === location.pathname + location.hash) return;
  history.pushState(null, '', path);
  moved();
}

/** Replaces the current address (a redirect: Back skips it). */
export function redirect(path: string) {
  history.replaceState(null, '', path);
  moved();
}

export function useRoute(): Route {
  const { path } = useLocation(); // re-renders on every navigation of the path
  const [, hashMoved] = useReducer((n: number) => n + 1, 0);
  useEffect(() => {
    // Back/Forward between #seq-N of one path, or a pasted deep link: same path, new hash.
    addEventListener('popstate', hashMoved);
    addEventListener('hashchange', hashMoved);
    return () => {
      removeEventListener('popstate', hashMoved);
      removeEventListener('hashchange', hashMoved);
    };
  }, []);
  return parseRoute(path, location.hash);
}
