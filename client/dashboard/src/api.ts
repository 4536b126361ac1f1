// The dashboard's typed client (client/client.ts) for /graphql on its own
// origin. With API tokens configured on the server, the token comes from
// `?token=` once (then kept in localStorage) or from the sidebar's token field.
// A `?token=` that differs from the kept one replaces it only when the user
// says so (main.tsx asks): a link must not switch anyone into another tenant.
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';
import { createForklineClient, ForklineClientError } from '../../client.ts';
import { backoffDelay } from '../../../src/core/backoff.ts';

export { ForklineClientError };

export interface Sink<T> {
  next(value: T): void;
  error?(err: unknown): void;
  /** The connection was lost; `follow` resubscribes once the server answers again. */
  reconnecting?(err: unknown): void;
  /**
   * Resubscribed after `reconnecting` (the server answers again): what the
   * subscription does not replay (a list's changes meanwhile) is read again here.
   */
  resumed?(): void;
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

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * Waits until the server answers /healthz again (a restart: it is back as soon
 * as it listens), polling at most every 2 s, so a page resumes within about a
 * second or two of the server's return instead of after a long backoff.
 */
async function serverBack(stopped: () => boolean): Promise<void> {
  for (let wait = 250; !stopped(); wait = Math.min(wait * 2, 2000)) {
    try {
      // Any answer but a gateway's "not there" (a dev proxy says 502 while the server is down).
      if ((await fetch(new URL('/healthz', location.href), { cache: 'no-store' })).status < 500) return;
    } catch {
      // still down
    }
    await sleep(wait);
  }
}

/**
 * Feeds a subscription to `sink` until the returned function is called. A lost
 * connection resubscribes through `open` (which may resume, e.g. from the last
 * seq seen) as soon as the server answers again, then calls `sink.resumed`;
 * GraphQL errors end it through `sink.error`.
 */
export function follow<R>(open: () => AsyncIterableIterator<R>, sink: Sink<R>): () => void {
  let stopped = false;
  let results: AsyncIterableIterator<R> | undefined;
  void (async () => {
    let lost = false;
    for (let attempt = 0; !stopped; attempt++) {
      try {
        results = open();
        if (lost) {
          lost = false;
          sink.resumed?.();
        }
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
        if (!lost) sink.reconnecting?.(err);
        lost = true;
        await sleep(backoffDelay(attempt, { initialMs: 250, maxMs: 2000 }));
        await serverBack(() => stopped);
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
