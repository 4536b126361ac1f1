// Typed forkline client: queries and mutations over HTTP (fetch), subscriptions
// over graphql-ws. Documents are the TypedDocumentNodes that `npm run build`
// generates from client/operations/*.graphql into src/generated/ (packages/client).
//
//   const client = createForklineClient({ url: 'http://127.0.0.1:4000/graphql' });
//   const { sessions } = await client.query(SessionsDocument, { first: 10 });
//   for await (const { sessionEvents } of client.subscribe(SessionEventsLiveDocument, { sessionId })) …
import { print, type DocumentNode } from 'graphql';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import type { TypedDocumentNode } from '@graphql-typed-document-node/core';

import { Backoff, sleep } from './backoff.ts';
import type { EventFieldsFragment } from './generated/graphql.ts';

export * from './generated/graphql.ts';
export { Backoff, backoffDelay, sleep, type BackoffOptions } from './backoff.ts';

export interface ForklineClientOptions {
  /** The GraphQL endpoint, e.g. http://127.0.0.1:4000/graphql (ws:// is derived from it). */
  url: string;
  /**
   * How long to keep retrying what is safe to retry — queries, and mutations
   * that carry an idempotency key (one is generated when the operation declares
   * `$idempotencyKey` and none is given) — after a lost connection or a 503
   * (SERVICE_UNAVAILABLE, honouring Retry-After); and any request refused 429
   * (RATE_LIMITED: nothing was done), after its Retry-After. Default 15 s; 0:
   * never retry.
   */
  retryForMs?: number;
  /** API token (sent as `Authorization: Bearer <token>`; WebSocket: connectionParams.authorization). */
  token?: string;
  /** WebSocket constructor; default: the global one (browsers), else the `ws` package (Node 20 has none). */
  webSocketImpl?: unknown;
  fetch?: typeof fetch;
  /**
   * The largest answer read (a query's, a mutation's, an event page's, an
   * import's outcome); a larger one fails with RESPONSE_TOO_LARGE once this
   * much has come, instead of being held whole. Default 128 MiB, the server's
   * own ceiling (FORKLINE_MAX_RESPONSE_BYTES' default): it sends none larger.
   */
  maxResponseBytes?: number;
  /**
   * How long a query or an event page may take from its sending to the last
   * byte of its answer, and a mutation (or an error page) from its answer's
   * headers to its last byte (a mutation may work for long before it answers:
   * an import waiting for a slot, a compaction waiting for a turn); past it the
   * request fails with RESPONSE_TIMEOUT, so a server or proxy that stalls or
   * trickles cannot hold the caller forever. An upload's wait is bounded by
   * silence instead: while the recording is sent, the server must take its
   * next chunk within this bound; from the moment the recording is
   * sent, the server must answer, then send a progress line, within this bound
   * each time (it sends one every quarter second while the import waits or
   * runs), so a long import is waited for and a server that went is not.
   * Default 60 s. The `fetch` given must honour `signal` for the wait before
   * the answer's headers.
   */
  responseTimeoutMs?: number;
}

/** FORKLINE_MAX_RESPONSE_BYTES' default (docs/operations.md "Limits"): the server sends no larger answer. */
export const DEFAULT_MAX_RESPONSE_BYTES = 128 * 1024 * 1024;
export const DEFAULT_RESPONSE_TIMEOUT_MS = 60_000;
/** How much of an error page is read: its message is in its start, and a hostile one may be endless. */
const ERROR_EXCERPT_BYTES = 64 * 1024;

export interface GraphQLErrorInfo {
  message: string;
  path?: ReadonlyArray<string | number>;
  extensions?: Record<string, unknown>;
}

/** A GraphQL or transport error; `code` is the first error's extensions.code (docs/contract.md#graphql-names). */
export class ForklineClientError extends Error {
  readonly code: string;
  constructor(
    readonly errors: GraphQLErrorInfo[],
    readonly status?: number,
    /** Seconds the server asked to wait before retrying (503, 429). */
    readonly retryAfter?: number,
  ) {
    super(errors.map((e) => e.message).join('; ') || 'GraphQL request failed');
    this.name = 'ForklineClientError';
    this.code = String(errors.find((e) => e.extensions?.code)?.extensions?.code ?? (status ? `HTTP_${status}` : 'NETWORK_ERROR'));
  }
}

/** How far the server's import of an uploaded recording got (POST /recordings with `Accept: application/x-ndjson`). */
export interface ImportProgress {
  bytes: number;
  totalBytes: number;
  lines: number;
  /** The import waits for one of the server's import slots (FORKLINE_MAX_IMPORTS_AT_ONCE): nothing checked yet. */
  queued?: boolean;
}

/** Variables may be left out when none is required. */
type Vars<V> = Record<string, never> extends V ? [variables?: V] : [variables: V];

export interface ForklineClient {
  query<R, V extends Record<string, unknown>>(doc: TypedDocumentNode<R, V>, ...variables: Vars<V>): Promise<R>;
  mutate<R, V extends Record<string, unknown>>(doc: TypedDocumentNode<R, V>, ...variables: Vars<V>): Promise<R>;
  /** Each `next` payload's data; ends when the server completes; throws ForklineClientError on errors. */
  subscribe<R, V extends Record<string, unknown>>(doc: TypedDocumentNode<R, V>, ...variables: Vars<V>): AsyncIterableIterator<R>;
  /**
   * Streams a recording (JSON Lines) to POST /recordings, the import path for
   * recordings too large for a GraphQL string; resolves with the new session.
   */
  uploadRecording(
    body: ReadableStream<Uint8Array> | Blob | string,
    opts?: {
      idempotencyKey?: string;
      /** The import's progress once the body is sent: the recording's bytes and lines the server has checked and written so far. */
      onProgress?: (p: ImportProgress) => void;
    },
  ): Promise<{ id: string; eventCount: number; formatVersion: number; title: string | null }>;
  /**
   * A session's recording (JSON Lines) from GET /recordings, as a stream the
   * server writes as it reads the log; `eventCount` is the number of event
   * lines it will hold (after the header line), for progress.
   */
  downloadRecording(sessionId: string): Promise<{ eventCount: number; body: ReadableStream<Uint8Array> }>;
  /**
   * A page of a session's log from GET /sessions/<id>/events (events after
   * `after`, at most `first`, default 100): the same page as the events
   * connection, at a URL HTTP caches keep. `final` says the page is full with a
   * next page, so it never changes (the server marks it immutable: a browser
   * answers it from its cache).
   */
  eventPage(sessionId: string, page?: { after?: number; first?: number }): Promise<EventPage>;
  /** Closes the WebSocket (if one was opened). */
  close(): Promise<void>;
}

/** A page of the log as GET /sessions/<id>/events serves it: the events connection, every Event field. */
export interface EventPage {
  edges: Array<{ cursor: string; node: EventFieldsFragment & { sessionId: string } }>;
  pageInfo: { hasNextPage: boolean; hasPreviousPage: boolean; startCursor: string | null; endCursor: string | null };
  final: boolean;
}

export function createForklineClient(opts: ForklineClientOptions): ForklineClient {
  const doFetch = opts.fetch ?? fetch;
  const authorization = opts.token ? `Bearer ${opts.token}` : undefined;
  const maxBytes = opts.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES;
  const timeoutMs = opts.responseTimeoutMs ?? DEFAULT_RESPONSE_TIMEOUT_MS;
  const token = opts.token;

  /**
   * Every error this client throws is built here: text from the other end (a
   * proxy's error page that repeats the request's headers, a reason, a message)
   * loses the token first, so it never reaches a thrown error, a log or a
   * session's `plugin/agent/error` event.
   */
  const fail = (errors: GraphQLErrorInfo[], status?: number, retryAfter?: number) =>
    new ForklineClientError(
      token
        ? errors.map((e) => (typeof e.message === 'string' && e.message.includes(token) ? { ...e, message: e.message.replaceAll(token, '[token]') } : e))
        : errors,
      status,
      retryAfter,
    );
  const unreachable = (url: string, err: unknown, deadline?: AbortSignal) =>
    deadline?.aborted ? timedOut(url) : fail([{ message: `cannot reach ${url}: ${(err as Error).cause ?? (err as Error).message}` }]);
  const timedOut = (url: string) =>
    fail([{ message: `no whole answer from ${url} within ${timeoutMs} ms (responseTimeoutMs)`, extensions: { code: 'RESPONSE_TIMEOUT' } }]);

  /**
   * An answer's text, read as it comes: at most `limit` bytes (an error page:
   * its first `limit` bytes, the rest left unread), ended by `deadline`.
   */
  async function readAnswer(res: Response, url: string, deadline: AbortSignal, excerpt = !res.ok): Promise<string> {
    const text = await readText(res, url, deadline, excerpt);
    // Before any excerpt is cut from it: a cut could keep the token's first characters.
    return token ? text.replaceAll(token, '[token]') : text;
  }
  async function readText(res: Response, url: string, deadline: AbortSignal, excerpt: boolean): Promise<string> {
    const limit = excerpt ? ERROR_EXCERPT_BYTES : maxBytes;
    if (!res.body) return '';
    const reader = res.body.getReader();
    const stop = () => void reader.cancel().catch(() => undefined);
    deadline.addEventListener('abort', stop, { once: true });
    const decoder = new TextDecoder();
    let text = '';
    let bytes = 0;
    try {
      for (;;) {
        let r: ReadableStreamReadResult<Uint8Array>;
        try {
          r = await reader.read();
        } catch (err) {
          if (deadline.aborted) throw timedOut(url);
          throw fail([{ message: `the answer from ${url} was cut short: ${(err as Error).message}` }]);
        }
        if (deadline.aborted) throw timedOut(url);
        if (r.done) break;
        if (bytes + r.value.byteLength > limit) {
          stop();
          if (!excerpt)
            throw fail(
              [{ message: `the answer from ${url} is over ${limit} bytes (maxResponseBytes)`, extensions: { code: 'RESPONSE_TOO_LARGE' } }],
              res.status,
            );
          return text + decoder.decode(r.value.subarray(0, limit - bytes));
        }
        bytes += r.value.byteLength;
        text += decoder.decode(r.value, { stream: true });
      }
    } finally {
      deadline.removeEventListener('abort', stop);
    }
    return text + decoder.decode();
  }
  let ws: Client | undefined;
  /** Whether `ws` is acknowledged and open now (graphql-ws's `connected`, until `closed`). */
  let wsOpen: { now: boolean } = { now: false };
  const wsUrl = opts.url.replace(/^http/, 'ws');
  const socket = () => {
    if (ws) return ws;
    const open: { now: boolean } = (wsOpen = { now: false });
    return (ws = createClient({
      url: wsUrl,
      webSocketImpl: opts.webSocketImpl ?? (globalThis as { WebSocket?: unknown }).WebSocket ?? WebSocket,
      connectionParams: authorization ? { authorization } : {},
      lazy: true,
      retryAttempts: 0,
      // A server that opens the socket and never acknowledges would hold every subscription's first next().
      // (Each message is bounded by the WebSocket itself: `ws` refuses one over 100 MiB, below the server's ceiling.)
      connectionAckWaitTimeout: timeoutMs,
      on: { connected: () => (open.now = true), closed: () => (open.now = false) },
    }));
  };

  /** One POST to /graphql. */
  async function post<R>(doc: DocumentNode, variables: unknown): Promise<R> {
    // A query's whole answer is due within the deadline. A mutation may work for long before it answers (an import
    // waiting for a slot, a compaction waiting for a running turn and its summary): its deadline starts with the
    // answer's headers, and bounds the body that follows.
    const mutation = doc.definitions.some((d) => d.kind === 'OperationDefinition' && d.operation === 'mutation');
    let deadline = mutation ? new AbortController().signal : AbortSignal.timeout(timeoutMs);
    let res: Response;
    try {
      res = await doFetch(opts.url, {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          accept: 'application/graphql-response+json, application/json',
          ...(authorization ? { authorization } : {}),
        },
        body: JSON.stringify({ query: queryText(doc), variables: variables ?? {} }),
        signal: deadline,
      });
    } catch (err) {
      throw unreachable(opts.url, err, deadline);
    }
    if (mutation) deadline = AbortSignal.timeout(timeoutMs);
    const text = await readAnswer(res, opts.url, deadline);
    let body: { data?: R; errors?: GraphQLErrorInfo[] };
    try {
      body = JSON.parse(text);
    } catch {
      throw fail([{ message: `HTTP ${res.status}: ${text.slice(0, 200)}` }], res.status, retryAfterOf(res));
    }
    if (body.errors?.length) throw fail(body.errors, res.status, retryAfterOf(res));
    if (!res.ok || body.data == null) throw fail([{ message: `HTTP ${res.status}` }], res.status, retryAfterOf(res));
    return body.data;
  }

  /**
   * Queries, and mutations given an idempotency key (generated when the
   * operation declares `$idempotencyKey`), are retried with the same key after
   * a lost connection or a 503: a lost response never duplicates a fork or a
   * message. Other mutations fail at once.
   */
  async function request<R>(doc: DocumentNode, variables: Record<string, unknown> | undefined, mutation: boolean): Promise<R> {
    let vars = variables;
    if (mutation && declaresIdempotencyKey(doc) && vars?.idempotencyKey == null) vars = { ...vars, idempotencyKey: newIdempotencyKey() };
    const safe = !mutation || vars?.idempotencyKey != null;
    return withRetries(() => post<R>(doc, vars), opts.retryForMs ?? 15_000, safe);
  }

  /** A stream can be sent once; a string or Blob is retried like a keyed mutation. */
  async function uploadRecording(
    body: ReadableStream<Uint8Array> | Blob | string,
    upload: { idempotencyKey?: string; onProgress?: (p: ImportProgress) => void } = {},
  ) {
    const key = upload.idempotencyKey ?? newIdempotencyKey();
    return withRetries(() => uploadOnce(body, key, upload.onProgress), body instanceof ReadableStream ? 0 : (opts.retryForMs ?? 15_000));
  }

  type UploadAnswer = { session?: { id: string; eventCount: number; formatVersion: number; title: string | null }; errors?: GraphQLErrorInfo[] };

  async function uploadOnce(body: ReadableStream<Uint8Array> | Blob | string, key: string, onProgress?: (p: ImportProgress) => void) {
    const url = opts.url.replace(/\/graphql\/?$/, '/recordings');
    // Once the transport has taken the recording, the server owes a sign of life every responseTimeoutMs: its
    // answer's headers, then a progress line every quarter second while the import waits for a slot or runs (asked
    // for whether or not the caller shows it: the lines are the keep-alive), then the outcome. Silence that long means
    // it went or stalled, so the wait ends there instead of never; a long import that keeps reporting is not cut.
    const quiet = new Silence(timeoutMs);
    let res: Response;
    try {
      res = await doFetch(url, {
        method: 'POST',
        headers: {
          'content-type': 'application/x-ndjson',
          'idempotency-key': key,
          // A long import answers with its progress as JSON Lines, its outcome last; a sooner outcome as plain JSON.
          accept: 'application/x-ndjson, application/json',
          ...(authorization ? { authorization } : {}),
        },
        body: quiet.watching(body),
        duplex: 'half', // a streamed request body (Node's fetch requires saying so)
        signal: quiet.signal,
      } as RequestInit);
    } catch (err) {
      quiet.end();
      if (quiet.signal.aborted) throw silent(url, 'no answer');
      throw unreachable(url, err);
    }
    quiet.answered();
    try {
      let status = res.status;
      let parsed: UploadAnswer;
      if (res.body && /^application\/x-ndjson\b/.test(res.headers.get('content-type') ?? '')) {
        // Cut short (the server went): whether it imported is unknown, so it counts as a lost connection (a retry with the key imports once).
        const last = await progressLines(res.body, onProgress, quiet).catch((err: unknown) => {
          if (quiet.signal.aborted) throw silent(url, 'no progress');
          throw fail([{ message: `the import's answer from ${url} was cut short (${(err as Error).message})` }]);
        });
        if (!last) throw fail([{ message: `the import's answer from ${url} was cut short (no outcome)` }]);
        status = last.status ?? status;
        parsed = last;
      } else {
        // A plain answer (a sooner outcome, a refusal) is whole within responseTimeoutMs of its headers.
        const text = await readAnswer(res, url, quiet.signal);
        try {
          parsed = JSON.parse(text);
        } catch {
          throw fail([{ message: `HTTP ${res.status}: ${text.slice(0, 200)}` }], res.status);
        }
      }
      if (status >= 300 || !parsed.session) throw fail(parsed.errors ?? [{ message: `HTTP ${status}` }], status, retryAfterOf(res));
      return parsed.session;
    } finally {
      quiet.end();
    }
  }

  /** The server said nothing for responseTimeoutMs while the upload waited on it: whether it imported is unknown (a retry with the key imports once). */
  const silent = (url: string, what: string) =>
    fail([
      {
        message: `the import's answer from ${url} was cut short (${what} from the server for ${timeoutMs} ms (responseTimeoutMs))`,
        extensions: { code: 'RESPONSE_TIMEOUT' },
      },
    ]);

  /** Reads an import's progress lines, passing each on; resolves with its last line (the outcome), or undefined when cut short. */
  async function progressLines(body: ReadableStream<Uint8Array>, onProgress: ((p: ImportProgress) => void) | undefined, quiet: Silence) {
    const decoder = new TextDecoder();
    let rest = '';
    let outcome: (UploadAnswer & { status?: number }) | undefined;
    const reader = body.getReader();
    // A fetch that does not end the body on its signal is stopped here; the cancelled read resolves `done`, which the
    // caller reads as the silence it was (the signal is aborted), not as a short answer.
    const stop = () => void reader.cancel().catch(() => {});
    quiet.signal.addEventListener('abort', stop, { once: true });
    try {
      for (let r = await reader.read(); !r.done; r = await reader.read()) {
        quiet.heard();
        const lines = (rest + decoder.decode(r.value, { stream: true })).split('\n');
        rest = lines.pop()!;
        if (rest.length > maxBytes) throw new Error(`a progress line over ${maxBytes} characters (maxResponseBytes)`);
        for (const line of lines.filter(Boolean)) {
          const value = JSON.parse(line) as { progress?: ImportProgress } & UploadAnswer & { status?: number };
          if (value.progress) onProgress?.(value.progress);
          else outcome = value;
        }
      }
    } finally {
      quiet.signal.removeEventListener('abort', stop);
    }
    if (quiet.signal.aborted) throw new Error('silence');
    return outcome;
  }

  async function downloadRecording(sessionId: string) {
    const url = `${opts.url.replace(/\/graphql\/?$/, '/recordings')}?session=${encodeURIComponent(sessionId)}`;
    let res: Response;
    try {
      res = await doFetch(url, { headers: authorization ? { authorization } : {} });
    } catch (err) {
      throw unreachable(url, err);
    }
    if (!res.ok || !res.body) {
      const text = await readAnswer(res, url, AbortSignal.timeout(timeoutMs), true);
      let errors: GraphQLErrorInfo[] | undefined;
      try {
        errors = (JSON.parse(text) as { errors?: GraphQLErrorInfo[] }).errors;
      } catch {
        errors = undefined;
      }
      throw fail(errors ?? [{ message: `HTTP ${res.status}: ${text.slice(0, 200)}` }], res.status, retryAfterOf(res));
    }
    return { eventCount: Number(res.headers.get('x-forkline-event-count') ?? 0), body: res.body };
  }

  async function eventPage(sessionId: string, page: { after?: number; first?: number } = {}): Promise<EventPage> {
    const q = new URLSearchParams();
    if (page.after !== undefined) q.set('after', String(page.after));
    if (page.first !== undefined) q.set('first', String(page.first));
    const url = `${opts.url.replace(/\/graphql\/?$/, '')}/sessions/${encodeURIComponent(sessionId)}/events${q.toString() ? `?${q}` : ''}`;
    return withRetries(async () => {
      const deadline = AbortSignal.timeout(timeoutMs);
      let res: Response;
      try {
        res = await doFetch(url, { headers: authorization ? { authorization } : {}, signal: deadline });
      } catch (err) {
        throw unreachable(url, err, deadline);
      }
      const text = await readAnswer(res, url, deadline);
      let body: { data?: { session: { events: Omit<EventPage, 'final'> } | null }; errors?: GraphQLErrorInfo[] };
      try {
        body = JSON.parse(text);
      } catch {
        throw fail([{ message: `HTTP ${res.status}: ${text.slice(0, 200)}` }], res.status, retryAfterOf(res));
      }
      const events = body.data?.session?.events;
      if (body.errors?.length || !res.ok || !events) throw fail(body.errors ?? [{ message: `HTTP ${res.status}` }], res.status, retryAfterOf(res));
      return { ...events, final: /\bimmutable\b/.test(res.headers.get('cache-control') ?? '') };
    }, opts.retryForMs ?? 15_000);
  }

  // A plain iterator, not an async generator: return() must end a subscription
  // at once, even while a next() is waiting (a generator would queue it until
  // the next item arrived, which may be never).
  function subscribe<R>(doc: DocumentNode, variables: unknown): AsyncIterableIterator<R> {
    const results = socket().iterate<R>({ query: queryText(doc), variables: (variables ?? {}) as Record<string, unknown> });
    const done: IteratorReturnResult<undefined> = { done: true, value: undefined };
    return {
      async next(): Promise<IteratorResult<R>> {
        let r;
        try {
          r = await results.next();
        } catch (err) {
          const e = asClientError(err, wsUrl);
          throw fail(e.errors, e.status, e.retryAfter);
        }
        if (r.done) return done;
        if (r.value.errors?.length) {
          await results.return?.();
          throw fail(r.value.errors as GraphQLErrorInfo[]);
        }
        return { done: false, value: r.value.data as R };
      },
      async return() {
        await results.return?.();
        return done;
      },
      async throw(err: unknown) {
        await results.return?.();
        throw err;
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

  return {
    query: (doc, ...v) => request(doc, v[0], false),
    mutate: (doc, ...v) => request(doc, v[0], true),
    subscribe: (doc, ...v) => subscribe(doc, v[0]),
    uploadRecording,
    downloadRecording,
    eventPage,
    async close() {
      const closing = ws;
      const open = wsOpen.now;
      ws = undefined;
      // Its socket had already closed with an error (a refused token, a lost server), which its subscriptions reported: nothing is left to close.
      const disposed = Promise.resolve(closing?.dispose()).catch(() => {});
      // A socket still opening is not waited for: graphql-ws's dispose waits for it to open, which a proxy that never
      // answers the upgrade (one that passes plain requests only) holds forever; it is closed once it opens.
      if (open) await disposed;
    },
  };
}

/** Each document's text, printed once (a runner sends the same few documents thousands of times). */
const printed = new WeakMap<DocumentNode, string>();
function queryText(doc: DocumentNode): string {
  let text = printed.get(doc);
  if (text === undefined) printed.set(doc, (text = print(doc)));
  return text;
}

/**
 * What may be tried again: the request did not get through, its answer did not come whole in time (as a lost
 * connection: whether it was done is unknown), or the server was briefly unable to answer.
 */
const isRetryable = (err: unknown) =>
  err instanceof ForklineClientError &&
  (err.code === 'NETWORK_ERROR' || err.code === 'RESPONSE_TIMEOUT' || err.code === 'SERVICE_UNAVAILABLE' || err.status === 503);

/** A 429 (RATE_LIMITED: a token's rate, or its tenant's imports): refused before anything was done, so any request may go again. */
const isRefusal = (err: unknown) => err instanceof ForklineClientError && err.status === 429;

/**
 * `attempt`, again within `retryForMs` after a refusal (429, after its Retry-After), and, when it is `safe` to send
 * twice, after a lost connection or a 503.
 */
async function withRetries<T>(attempt: () => Promise<T>, retryForMs: number, safe = true): Promise<T> {
  const deadline = Date.now() + retryForMs;
  const backoff = new Backoff({ initialMs: 250, maxMs: 4000, jitter: 0.5 });
  for (;;) {
    try {
      return await attempt();
    } catch (err) {
      const pause = backoff.next(err instanceof ForklineClientError && err.retryAfter ? err.retryAfter * 1000 : undefined);
      if (!(isRefusal(err) || (safe && isRetryable(err))) || Date.now() + pause > deadline) throw err;
      await sleep(pause);
    }
  }
}

const retryAfterOf = (res: Response) => {
  const seconds = Number(res.headers.get('retry-after'));
  return Number.isFinite(seconds) && seconds > 0 ? seconds : undefined;
};

const declaresIdempotencyKey = (doc: DocumentNode) =>
  doc.definitions.some((d) => d.kind === 'OperationDefinition' && d.variableDefinitions?.some((v) => v.variable.name.value === 'idempotencyKey'));

/** crypto.randomUUID exists in Node and in browsers' secure contexts; elsewhere, 16 random bytes. */
function newIdempotencyKey(): string {
  const c = globalThis.crypto;
  if (typeof c?.randomUUID === 'function') return c.randomUUID();
  return Array.from(c.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, '0')).join('');
}

/** graphql-ws rejects with a list of GraphQL errors, an Error, a CloseEvent, or the socket's error event (the server could not be reached). */
function asClientError(err: unknown, wsUrl: string): ForklineClientError {
  if (err instanceof ForklineClientError) return err;
  if (Array.isArray(err)) return new ForklineClientError(err as GraphQLErrorInfo[]);
  if (err instanceof Error) return new ForklineClientError([{ message: err.message }]);
  const close = err as { code?: number; reason?: string };
  if (close && typeof close.code === 'number') {
    const message = `WebSocket closed (${close.code}${close.reason ? `: ${close.reason}` : ''})`;
    // The server's refusals at connection_init stand for an HTTP status: a caller must tell them from a lost
    // connection (retrying a rejected token only trips the server's auth-failure throttle).
    if (close.code === 4401) return new ForklineClientError([{ message, extensions: { code: 'UNAUTHENTICATED' } }], 401);
    if (close.code === 4403) return new ForklineClientError([{ message, extensions: { code: 'FORBIDDEN' } }], 403);
    if (close.code === 4429) {
      const code = /^([A-Z_]+):/.exec(close.reason ?? '')?.[1] ?? 'RATE_LIMITED';
      const seconds = Number(/retry in (\d+) s/.exec(close.reason ?? '')?.[1]);
      return new ForklineClientError([{ message, extensions: { code } }], 429, seconds > 0 ? seconds : undefined);
    }
    return new ForklineClientError([{ message }]);
  }
  if (err && typeof err === 'object') {
    // An error event: `ws` gives its message and error; a browser's says nothing more than its type.
    const event = err as { message?: unknown; error?: unknown };
    const detail = event.error instanceof Error ? event.error.message : typeof event.message === 'string' ? event.message : '';
    return new ForklineClientError([{ message: `cannot reach ${wsUrl}${detail ? `: ${detail}` : ''}` }]);
  }
  return new ForklineClientError([{ message: String(err) }]);
}

/**
 * The bound on an upload's wait for its server: `signal` aborts once the server has been owed a sign of life for
 * `ms` — the next read of the recording by the transport, the answer's headers once the recording is sent, or the
 * answer's next bytes. The time spent waiting for the caller's own stream (a slow pipe into `forkline import -`)
 * is not the server's, and is not counted.
 */
class Silence {
  readonly #ms: number;
  readonly #abort = new AbortController();
  #timer: ReturnType<typeof setTimeout> | undefined;
  /** The answer's headers came: the request body no longer moves the bound. */
  #answered = false;
  #ended = false;
  /** Cancels the caller's stream (watching). */
  #stopSource?: () => void;

  constructor(ms: number) {
    this.#ms = ms;
  }

  get signal(): AbortSignal {
    return this.#abort.signal;
  }

  /** The server owes the next sign of life within the bound from now. */
  heard() {
    if (this.#ended) return;
    clearTimeout(this.#timer);
    this.#timer = setTimeout(() => this.#abort.abort(), this.#ms);
  }

  answered() {
    this.#answered = true;
    this.heard();
  }

  end() {
    this.#ended = true;
    clearTimeout(this.#timer);
    this.#stopSource?.();
  }

  /**
   * The recording as a stream the transport pulls a chunk at a time: the bound stops while the caller's stream is
   * read, and restarts with each chunk handed over. Once the upload is over (its silence, its answer, its failure)
   * the caller's stream is cancelled and no more is handed over: Node's fetch, aborted, went on reading the request
   * body to its end, in a loop that held the event loop (an endless stream: for ever).
   */
  watching(body: ReadableStream<Uint8Array> | Blob | string): ReadableStream<Uint8Array> {
    const source = (typeof body === 'string' ? new Blob([body]) : body instanceof Blob ? body : undefined)?.stream() ?? (body as ReadableStream<Uint8Array>);
    const reader = source.getReader();
    const over = () => this.#ended || this.#abort.signal.aborted;
    const overError = () => new Error('the upload is over');
    this.#stopSource = () => void reader.cancel(overError()).catch(() => {});
    this.#abort.signal.addEventListener('abort', this.#stopSource, { once: true });
    return new ReadableStream<Uint8Array>(
      {
        pull: async (controller) => {
          if (over()) return controller.error(overError());
          // Waiting for the caller's stream, not for the server.
          if (!this.#answered) clearTimeout(this.#timer);
          const r = await reader.read();
          if (over()) return controller.error(overError());
          if (r.done) controller.close();
          else controller.enqueue(r.value);
          // The transport owes the next pull (the server is taking the bytes), or, the recording sent, the answer.
          if (!this.#answered) this.heard();
        },
        cancel: (reason) => reader.cancel(reason),
      },
      { highWaterMark: 0 },
    );
  }
}
