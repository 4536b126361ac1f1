// The fetch under every request forkline sends to a server outside (a model
// provider, a Streamable HTTP MCP server): redirects stay on the origin the
// request was sent to (docs/operations.md "Threat model"). Those requests carry
// their credentials in headers, and fetch drops only `Authorization` when a
// redirect leaves the origin — Anthropic's `x-api-key`, Google's
// `x-goog-api-key` and the headers an MCP server's config names would follow
// the server's `Location` to any host. A redirect within the origin (an MCP
// server moving /mcp to /mcp/) is followed as fetch would; one to another
// origin fails the request naming both, nothing sent there.

const REDIRECT_STATUSES = new Set([301, 302, 303, 307, 308]);
/** Redirects followed at most, within the origin (fetch's own bound is 20). */
export const MAX_REDIRECTS = 5;

/** A server redirected a request to another origin (or too often): not followed. */
export class RedirectRefusedError extends Error {
  name = 'RedirectRefusedError';
}

/** A fetch that follows redirects only within the request's origin; `input` is a URL or its text (what the SDKs pass). */
export function sameOriginFetch(
  base: (url: URL, init: RequestInit) => Promise<Response> = globalThis.fetch,
): (input: RequestInfo | URL, init?: RequestInit) => Promise<Response> {
  return async (input, init) => {
    if (input instanceof Request) throw new TypeError('sameOriginFetch takes a URL, not a Request');
    let url = new URL(input);
    let current: RequestInit = { ...init, redirect: 'manual' };
    for (let hops = 0; ; hops++) {
      const response = await base(url, current);
      const location = REDIRECT_STATUSES.has(response.status) ? response.headers.get('location') : null;
      if (location === null) return response;
      // Its body is never read: the connection goes.
      void response.body?.cancel().catch(() => {});
      const next = URL.canParse(location, url) ? new URL(location, url) : undefined;
      if (next?.origin !== url.origin) {
        const to = next ? next.origin : JSON.stringify(location.slice(0, 200));
        throw new RedirectRefusedError(`${url.origin} redirected the request to ${to}: not followed (its credentials are for ${url.origin} alone)`);
      }
      if (hops >= MAX_REDIRECTS) throw new RedirectRefusedError(`${url.origin} redirected the request more than ${MAX_REDIRECTS} times: not followed`);
      // As fetch does: a 303 (not of a HEAD), or a 301/302 of a POST, is followed by a GET without the body.
      const method = (current.method ?? 'GET').toUpperCase();
      if ((response.status === 303 && method !== 'HEAD') || ((response.status === 301 || response.status === 302) && method === 'POST')) {
        const headers = new Headers(current.headers);
        for (const h of ['content-type', 'content-encoding', 'content-language', 'content-location', 'content-length']) headers.delete(h);
        current = { ...current, method: 'GET', body: undefined, headers };
      }
      url = next;
    }
  };
}
