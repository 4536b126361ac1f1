// What a browser must not be able to do on a user's behalf: send "simple"
// cross-site requests that skip the CORS preflight (CSRF), open a WebSocket
// from another site, or reach a local-mode server through DNS rebinding.
import type http from 'node:http';
import type { Plugin } from 'graphql-yoga';
import { useCSRFPrevention } from '@graphql-yoga/plugin-csrf-prevention';
import { isLoopbackHost } from './security.ts';
import { perHeaderValue } from './per-header-value.ts';

/**
 * yoga's CSRF prevention: a request whose content type a cross-site form could
 * send (GET without one, text/plain, form encodings) needs a header that only
 * a preflighted request can carry. JSON POSTs (GraphiQL, the dashboard, fetch
 * clients) are preflighted anyway; a Bearer token counts as such a header.
 */
export function useCsrfPrevention(): Plugin {
  return useCSRFPrevention({ requestHeaders: ['x-graphql-yoga-csrf', 'authorization'] });
}

function hostnameOf(hostHeader: string | undefined | null): string | undefined {
  if (!hostHeader) return undefined;
  try {
    return new URL(`http://${hostHeader}`).hostname;
  } catch {
    return undefined;
  }
}

/**
 * Local mode on a loopback interface: only loopback Host names. A page whose
 * own name was rebound to 127.0.0.1 is "same origin" to the browser, but its
 * Host header still names the attacker's domain.
 */
export const isAllowedLocalHost = perHeaderValue((hostHeader: string | undefined | null): boolean => {
  const name = hostnameOf(hostHeader); // a URL parse: worth doing once per Host value
  return name !== undefined && isLoopbackHost(name);
}, 100);

/** Non-browser clients send no Origin; browsers may connect from this server's own origin or an allowed one. */
export function isAllowedOrigin(req: http.IncomingMessage, corsOrigins: readonly string[]): boolean {
  const origin = req.headers.origin;
  if (!origin) return true;
  if (corsOrigins.includes('*') || corsOrigins.includes(origin)) return true;
  try {
    return new URL(origin).host === req.headers.host;
  } catch {
    return false;
  }
}
