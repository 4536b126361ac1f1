// Path routing with the History API; the server answers every route with index.html.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { name: 'home' }
  | { name: 'session'; id: string; /** #seq-N: the event to show (a search hit). */ seq?: number }
  | { name: 'compare'; id: string };

export function parseRoute(pathname: string, hash = ''): Route {
  const m = pathname.match(/^\/sessions\/([^/]+)(\/compare)?\/?$/);
  if (!m) return { name: 'home' };
  const id = decodeURIComponent(m[1]);
  if (m[2]) return { name: 'compare', id };
  const seq = /^#seq-(\d+)$/.exec(hash);
  return seq ? { name: 'session', id, seq: Number(seq[1]) } : { name: 'session', id };
}

export const sessionPath = (id: string) => `/sessions/${encodeURIComponent(id)}`;
export const comparePath = (id: string) => `${sessionPath(id)}/compare`;
/** A session opened at one event (search hits link there). */
export const eventPath = (id: string, seq: number) => `${sessionPath(id)}#seq-${seq}`;

const ROUTE_CHANGED = 'forkline:route';

export function navigate(path: string) {
  if (path === location.pathname + location.hash) return;
  history.pushState(null, '', path);
  dispatchEvent(new Event(ROUTE_CHANGED));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname, location.hash));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.pathname, location.hash));
    addEventListener('popstate', update);
    addEventListener(ROUTE_CHANGED, update);
    return () => {
      removeEventListener('popstate', update);
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
