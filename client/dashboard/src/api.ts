// The dashboard's typed client (client/client.ts) for /graphql on its own
// origin. With API tokens configured on the server, the token comes from
// `?token=` once (then kept in localStorage) or from the sidebar's token field.
// A `?token=` that differs from the kept one replaces it only when the user
// says so (main.tsx asks): a link must not switch anyone into another tenant.
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { createForklineClient, ForklineClientError } from '../../client.ts';

export { ForklineClientError };

export interface Sink<T> {
  next(value: T): void;
  error?(err: unknown): void;
  /** The connection was lost; `follow` resubscribes. */
  reconnecting?(err: unknown): void;
  /** The server ended the subscription (e.g. its session was deleted). */
  complete?(): void;
}

const TOKEN_KEY = 'forkline.token';

/** The kept token, and a different one `?token=` offered (not kept until the user accepts it). */
function initialTokens(): { stored?: string; offered?: string } {
  const url = new URL(location.href);
  const fromUrl = url.searchParams.get('token');
  if (fromUrl) {
    url.searchParams.delete('token');
    history.replaceState(null, '', url); // keep the token out of the address bar and history
    if (localStorage.getItem(TOKEN_KEY) === null) localStorage.setItem(TOKEN_KEY, fromUrl);
  }
  const stored = localStorage.getItem(TOKEN_KEY) ?? undefined;
  return { stored, offered: fromUrl && fromUrl !== stored ? fromUrl : undefined };
}

export const tokens = initialTokens();

const client = createForklineClient({
  url: new URL('/graphql', location.href).toString(),
  token: tokens.stored,
  webSocketImpl: WebSocket,
});

/** Queries, mutations and subscriptions, typed by the generated documents. */
export const forkline = client;

/**
 * Feeds a subscription to `sink` until the returned function is called. A lost
 * connection resubscribes with backoff through `open` (which may resume, e.g.
 * from the last seq seen); GraphQL errors end it through `sink.error`.
 */
export function follow<R>(open: () => AsyncIterableIterator<R>, sink: Sink<R>): () => void {
  let stopped = false;
  let results: AsyncIterableIterator<R> | undefined;
  void (async () => {
    for (let attempt = 0; !stopped; attempt++) {
      try {
        results = open();
        for await (const r of results) {
          if (stopped) break;
          attempt = 0;
          sink.next(r);
        }
        if (!stopped) sink.complete?.();
        return;
      } catch (err) {
        if (stopped) return;
        if (!(err instanceof ForklineClientError) || err.code !== 'NETWORK_ERROR') return sink.error?.(err);
        sink.reconnecting?.(err);
        await new Promise((r) => setTimeout(r, Math.min(10_000, 500 * 2 ** attempt)));
      }
    }
  })();
  return () => {
    stopped = true;
    void results?.return?.();
  };
}

/** Stores the API token and reloads, so every query and subscription uses it. */
export function setToken(value: string) {
  if (value) localStorage.setItem(TOKEN_KEY, value);
  else localStorage.removeItem(TOKEN_KEY);
  location.reload();
}
