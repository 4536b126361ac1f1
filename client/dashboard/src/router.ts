// Path routing with the History API; the server answers every route with index.html.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { name: 'home' }
  | { name: 'session'; id: string }
  | { name: 'compare'; id: string };

export function parseRoute(pathname: string): Route {
  const m = pathname.match(/^\/sessions\/([^/]+)(\/compare)?\/?$/);
  if (!m) return { name: 'home' };
  const id = decodeURIComponent(m[1]);
  return m[2] ? { name: 'compare', id } : { name: 'session', id };
}

export const sessionPath = (id: string) => `/sessions/${encodeURIComponent(id)}`;
export const comparePath = (id: string) => `${sessionPath(id)}/compare`;

const ROUTE_CHANGED = 'forkline:route';

export function navigate(path: string) {
  if (path === location.pathname) return;
  history.pushState(null, '', path);
  dispatchEvent(new Event(ROUTE_CHANGED));
}

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.pathname));
  useEffect(() => {
    const update = () => setRoute(parseRoute(location.pathname));
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
