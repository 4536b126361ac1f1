// Real subscription clients for tests: graphql-ws over WebSocket, and GraphQL
// over SSE (yoga's POST with `accept: text/event-stream`). Each one records
// what arrives so a test can wait for a count or a condition.
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { waitFor } from './wait.ts';

export type Transport = 'ws' | 'sse';

export interface Recorded<T = any> {
  /** `data` of every `next` payload, in arrival order. */
  items: T[];
  errors: unknown[];
  /** True when the server completed the subscription. */
  completed: boolean;
  /** Waits until `pred` holds for the items so far (fails on a subscription error). */
  until(pred: (items: T[]) => boolean, what?: string, timeoutMs?: number): Promise<T[]>;
  count(n: number, timeoutMs?: number): Promise<T[]>;
  close(): Promise<void>;
}

const wsUrl = (httpUrl: string) => httpUrl.replace(/^http/, 'ws');

/** One graphql-ws client (one socket) that can carry several subscriptions. */
export function wsClient(url: string, opts: { connectionParams?: Record<string, unknown> } = {}): Client {
  return createClient({ url: wsUrl(url), webSocketImpl: WebSocket, lazy: true, retryAttempts: 0, ...opts });
}

function recorder<T>(close: () => Promise<void> | void): Recorded<T> & { onData(d: T): void; onError(e: unknown): void; onComplete(): void } {
  const rec = {
    items: [] as T[],
    errors: [] as unknown[],
    completed: false,
    onData: (d: T) => void rec.items.push(d),
    onError: (e: unknown) => void rec.errors.push(e),
    onComplete: () => void (rec.completed = true),
    async until(pred: (items: T[]) => boolean, what = 'subscription items', timeoutMs = 15_000) {
      await waitFor(
        () => {
          if (rec.errors.length) throw new Error(`subscription error: ${JSON.stringify(rec.errors[0])}`);
          return pred(rec.items);
        },
        { timeoutMs, intervalMs: 10, what: `${what} (have ${rec.items.length})` },
      );
      return rec.items;
    },
    count: (n: number, timeoutMs?: number) => rec.until((i) => i.length >= n, `${n} items`, timeoutMs),
    close: async () => void (await close()),
  };
  return rec;
}

/** Subscribes over graphql-ws; `client` lets many subscriptions share one socket. */
export function subscribeWs<T = any>(url: string, query: string, variables: Record<string, unknown> = {}, client?: Client): Recorded<T> {
  const own = client ?? wsClient(url);
  let stop = () => {};
  const rec = recorder<T>(async () => {
    stop();
    if (!client) await own.dispose();
  });
  stop = own.subscribe<T>(
    { query, variables },
    {
      next: (r) => (r.errors ? rec.onError(r.errors) : rec.onData(r.data as T)),
      error: (e) => rec.onError(e instanceof Error ? e.message : e),
      complete: () => rec.onComplete(),
    },
  );
  return rec;
}

/** Subscribes over SSE (text/event-stream) with fetch. */
export function subscribeSse<T = any>(url: string, query: string, variables: Record<string, unknown> = {}, headers: Record<string, string> = {}): Recorded<T> {
  const abort = new AbortController();
  const rec = recorder<T>(() => abort.abort());
  void (async () => {
    try {
      const res = await fetch(url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream', ...headers },
        body: JSON.stringify({ query, variables }),
        signal: abort.signal,
      });
      if (!res.ok || !res.body) return rec.onError(`HTTP ${res.status}: ${await res.text()}`);
      for await (const msg of sseMessages(res.body)) {
        if (msg.event === 'complete') return rec.onComplete();
        if (!msg.data) continue;
        const r = JSON.parse(msg.data);
        if (r.errors) rec.onError(r.errors);
        else rec.onData(r.data);
      }
      rec.onComplete();
    } catch (err) {
      if (!abort.signal.aborted) rec.onError(String(err));
    }
  })();
  return rec;
}

async function* sseMessages(body: ReadableStream<Uint8Array>): AsyncGenerator<{ event?: string; data?: string }> {
  const decoder = new TextDecoder();
  let buf = '';
  for await (const chunk of body as unknown as AsyncIterable<Uint8Array>) {
    buf += decoder.decode(chunk, { stream: true });
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const msg: { event?: string; data?: string } = {};
      for (const line of block.split('\n')) {
        if (line.startsWith('event:')) msg.event = line.slice(6).trim();
        else if (line.startsWith('data:')) msg.data = (msg.data ? `${msg.data}\n` : '') + line.slice(5).trimStart();
      }
      if (msg.event || msg.data) yield msg;
    }
  }
}

export function subscribe<T = any>(transport: Transport, url: string, query: string, variables: Record<string, unknown> = {}): Recorded<T> {
  return transport === 'ws' ? subscribeWs<T>(url, query, variables) : subscribeSse<T>(url, query, variables);
}

/** The subscriptions a server at `url` (its /graphql) holds open: its /metrics gauge. */
export async function openSubscriptions(url: string): Promise<number> {
  const text = await (await fetch(url.replace(/\/graphql$/, '/metrics'))).text();
  return Number(/^forkline_active_subscriptions (\d+)/m.exec(text)?.[1] ?? NaN);
}

/** Waits until the server holds `n` more subscriptions than `before` (they are listening). */
export async function subscriptionsOpened(url: string, before: number, n: number): Promise<void> {
  await waitFor(async () => (await openSubscriptions(url)) >= before + n, { what: `${n} subscriptions open` });
}

/**
 * A graphql-ws socket that subscribes `count` times to a session's events from
 * the start with `selection`, and reads nothing from then on; resolves with it
 * once every subscribe message is sent. `closed` resolves with its close code
 * and reason (it sees them once it reads again: `socket.resume()`).
 */
export async function stalledSocket(
  url: string,
  sessionId: string,
  count: number,
  selection: string,
): Promise<{ socket: WebSocket; closed: Promise<{ code: number; reason: string }> }> {
  const socket = new WebSocket(wsUrl(url), 'graphql-transport-ws');
  const closed = new Promise<{ code: number; reason: string }>((resolve) => socket.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    socket.once('message', (m) => (JSON.parse(String(m)).type === 'connection_ack' ? resolve() : reject(new Error(String(m)))));
  });
  socket.pause();
  const query = `subscription($id: ID!) { sessionEvents(sessionId: $id, afterSeq: -1) { ${selection} } }`;
  for (let i = 0; i < count; i++) socket.send(JSON.stringify({ id: `s${i}`, type: 'subscribe', payload: { query, variables: { id: sessionId } } }));
  while (socket.bufferedAmount > 0) await new Promise((r) => setTimeout(r, 10));
  return { socket, closed };
}

/** What one operation sent over graphql-ws got: its result (`next`, then `complete`), its errors, or the socket's close. */
export interface WsOperationOutcome {
  data?: any;
  errors?: Array<{ message: string; extensions?: Record<string, unknown> }>;
  closed?: { code: number; reason: string };
}

/**
 * Sends one operation (a mutation too) as a graphql-ws `subscribe` message on a socket of its own, its text exactly
 * as JSON.stringify writes it, and resolves with what came back: the result, the errors, or the close (a message the
 * server refuses before graphql-ws reads it closes the socket).
 */
export async function wsOperation(url: string, query: string, variables: Record<string, unknown> = {}): Promise<WsOperationOutcome> {
  const socket = new WebSocket(wsUrl(url), 'graphql-transport-ws');
  try {
    return await new Promise<WsOperationOutcome>((resolve, reject) => {
      let result: WsOperationOutcome = {};
      socket.once('error', reject);
      socket.on('close', (code, reason) => resolve({ ...result, closed: { code, reason: String(reason) } }));
      socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: {} })));
      socket.on('message', (m) => {
        const msg = JSON.parse(String(m));
        if (msg.type === 'connection_ack') socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query, variables } }));
        else if (msg.type === 'next') result = msg.payload;
        else if (msg.type === 'error') resolve({ errors: msg.payload });
        else if (msg.type === 'complete') resolve(result);
      });
    });
  } finally {
    socket.terminate();
  }
}
