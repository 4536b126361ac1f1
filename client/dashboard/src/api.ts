// The dashboard's typed client (client/client.ts) for /graphql on its own
// origin. With API tokens configured on the server, the token comes from
// `?token=` once (then kept in localStorage) or from the sidebar's token field.
// A `?token=` that differs from the kept one replaces it only when the user
// says so (main.tsx asks): a link must not switch anyone into another tenant.
import { createForklineClient, ForklineClientError } from '@forkline/client';
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
  fetch: reportingFetch,
});

/**
 * What stands between the page and the server, page-wide: the token was
 * rejected (nothing is retried until another is entered: retries would only
 * trip the server's per-address auth-failure throttle), the server asked us to
 * wait, or it cannot be reached. Null when requests get through.
 */
export type ConnectionProblem =
  { kind: 'token-rejected'; message: string } | { kind: 'rate-limited'; until: number; message: string } | { kind: 'unreachable' } | null;

let problem: ConnectionProblem = null;
const problemWatchers = new Set<(p: ConnectionProblem) => void>();

function setProblem(next: ConnectionProblem) {
  // A rejected token stays rejected until the page reloads with another.
  if (problem?.kind === 'token-rejected' && next?.kind !== 'token-rejected') return;
  if (problem === next || (problem?.kind === 'unreachable' && next?.kind === 'unreachable')) return;
  problem = next;
  for (const watch of problemWatchers) watch(next);
}

/** The problem an error stands for, or null when it is about the request itself (bad input, not found). */
export function problemOf(err: unknown): ConnectionProblem {
  if (!(err instanceof ForklineClientError)) return null;
  if (err.code === 'UNAUTHENTICATED' || err.status === 401) return { kind: 'token-rejected', message: err.message };
  if (err.status === 429) return { kind: 'rate-limited', until: Date.now() + (err.retryAfter ?? 5) * 1000, message: err.message };
  if (err.code === 'NETWORK_ERROR' || err.status === 502 || err.status === 504) return { kind: 'unreachable' };
  return null;
}

/**
 * fetch, saying "unreachable" as soon as a request does not get through: the
 * client retries queries for a while (packages/client retryForMs) before it
 * gives up, and the page would otherwise say nothing — "Loading…" — meanwhile.
 * An answer clears it (observed), as does the server's return (follow).
 */
function reportingFetch(input: RequestInfo | URL, init?: RequestInit): Promise<Response> {
  return fetch(input, init).catch((err: unknown) => {
    if ((err as Error)?.name !== 'AbortError') setProblem({ kind: 'unreachable' });
    throw err;
  });
}

/** The page-wide connection problem, kept current. */
export function currentProblem(): ConnectionProblem {
  return problem;
}

export function watchProblem(watch: (p: ConnectionProblem) => void): () => void {
  problemWatchers.add(watch);
  return () => problemWatchers.delete(watch);
}

/** Reports how a request went: an answer clears "unreachable" and "wait", a failure may set a problem. */
function observed<T>(request: Promise<T>): Promise<T> {
  return request.then(
    (value) => {
      if (problem && problem.kind !== 'token-rejected') setProblem(null);
      return value;
    },
    (err: unknown) => {
      const p = problemOf(err);
      if (p) setProblem(p);
      throw err;
    },
  );
}

/** Queries, mutations and subscriptions, typed by the generated documents; queries and mutations report connection problems. */
export const forkline: typeof client = {
  ...client,
  query: ((doc: Parameters<typeof client.query>[0], ...v: []) => observed(client.query(doc, ...v))) as typeof client.query,
  mutate: ((doc: Parameters<typeof client.mutate>[0], ...v: []) => observed(client.mutate(doc, ...v))) as typeof client.mutate,
  eventPage: (id, page) => observed(client.eventPage(id, page)),
};

/** Wakes whatever waits to retry (the Retry button): the next attempt goes now. */
let wakeWaiters: Array<() => void> = [];
export function retryNow() {
  const waiters = wakeWaiters;
  wakeWaiters = [];
  for (const wake of waiters) wake();
}

/** Sleeps `ms`, or less when retryNow is called. */
const sleep = (ms: number) =>
  new Promise<void>((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      wakeWaiters = wakeWaiters.filter((w) => w !== done);
      resolve();
    }
    wakeWaiters.push(done);
  });

/** Pages and subscriptions waiting for the server, and the one poll of /healthz they share. */
let waitingForServer = 0;
let healthPoll: Promise<void> | null = null;

async function pollHealth(): Promise<void> {
  for (let wait = 250; waitingForServer > 0; wait = Math.min(wait * 2, 2000)) {
    try {
      // Any answer but a gateway's "not there" (a dev proxy says 502 while the server is down).
      if ((await fetch(new URL('/healthz', location.href), { cache: 'no-store' })).status < 500) return;
    } catch {
      // Still down, whatever cleared the word meanwhile (a request answered while the server was draining).
      setProblem({ kind: 'unreachable' });
    }
    await sleep(wait);
  }
}

/** How often a waiter looks at its `stopped` while the shared poll goes on. */
const STOPPED_CHECK_MS = 2000;

/**
 * Waits until the server answers /healthz again (a restart: it is back as soon
 * as it listens), polling at most every 2 s, so a page resumes within about a
 * second or two of the server's return instead of after a long backoff. Every
 * waiter of the page shares one poll: one each made a page with ten live
 * subscriptions send five requests a second, each a console error, while the
 * server was down.
 */
export async function serverBack(stopped: () => boolean): Promise<void> {
  waitingForServer++;
  try {
    while (!stopped()) {
      const poll = (healthPoll ??= pollHealth().finally(() => (healthPoll = null)));
      let timer: ReturnType<typeof setTimeout> | undefined;
      const back = await Promise.race([poll.then(() => true), new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), STOPPED_CHECK_MS)))]);
      clearTimeout(timer);
      if (back) return;
    }
  } finally {
    waitingForServer--;
  }
}

/**
 * `work` run one at a time: asked while it runs, it runs once more after (however often it was asked meanwhile),
 * unless `stopped` by then. `work` handles its own errors.
 */
export function oneAtATime(work: () => Promise<void>, stopped: () => boolean): () => void {
  let running = false;
  let again = false;
  const run = () => {
    if (running) return void (again = true);
    running = true;
    void work().finally(() => {
      running = false;
      if (again && !stopped()) {
        again = false;
        run();
      }
    });
  };
  return run;
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
        const p = problemOf(err);
        if (p) setProblem(p);
        if (p?.kind === 'rate-limited') {
          // Asked to wait: wait as told, then try again (nothing was lost).
          await sleep(Math.max(0, p.until - Date.now()));
          continue;
        }
        // A rejected token ends here: retrying it would only trip the auth-failure throttle.
        if (p?.kind !== 'unreachable') return sink.error?.(err);
        if (!lost) sink.reconnecting?.(err);
        lost = true;
        await sleep(backoffDelay(attempt, { initialMs: 250, maxMs: 2000 }));
        await serverBack(() => stopped);
        if (!stopped && currentProblem()?.kind === 'unreachable') setProblem(null);
      }
    }
  })();
  return () => {
    stopped = true;
    void results?.return?.();
  };
}

/**
 * `follow` for a subscription whose first result comes once the server listens (sessionsChanged's
 * `startWith`): `sink.first` sees the first result after each (re)subscribe, then `sink.next` sees every
 * result. A query answered before then may have missed a change (docs/api.md, sessionsChanged): `first`
 * is where it is read again.
 */
export function followListening<R>(open: () => AsyncIterableIterator<R>, sink: Sink<R> & { first(r: R): void }): () => void {
  let listening = false;
  return follow(
    () => {
      listening = false;
      return open();
    },
    {
      ...sink,
      next: (r) => {
        if (!listening) {
          listening = true;
          sink.first(r);
        }
        sink.next(r);
      },
    },
  );
}

/** Stores the API token and reloads, so every query and subscription uses it. */
export function setToken(value: string) {
  if (value) localStorage.setItem(TOKEN_KEY, value);
  else localStorage.removeItem(TOKEN_KEY);
  location.reload();
}
