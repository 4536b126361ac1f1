// The `fetch` a Streamable HTTP server's transport uses, so that what the
// server answers is bounded as a stdio server's is (docs/operations.md
// "Threat model"): the SDK reads an HTTP answer whole (a JSON body) or for as
// long as it flows (an SSE stream), and a request it gave up on (timed out,
// its turn stopped) keeps its HTTP request open. Here:
// - a JSON body, and each SSE event, is at most `maxMessageBytes` (the SDK's
//   bound on a stdio message): past it the body is cut, and a request's
//   stream ends with an error answer for that request;
// - a request the client cancels (`notifications/cancelled`, which the SDK
//   sends on a timeout or an abort) has its HTTP request aborted, and every
//   POST ends by `deadlineMs` whatever happens;
// - a GET (the server's own stream, or a resumed one) starts at most once a
//   second, whatever `retry` the server asks for, and the server's own stream
//   is read at most `GET_STREAM_BYTES_PER_S` (a flood of notifications or
//   requests waits in the server's socket, not in this process's event loop);
// - a request's own stream (a POST's SSE answer, a resumed one) may carry at
//   most `MAX_STREAM_MESSAGES` messages and `maxMessageBytes` besides its
//   answer (notifications without end would otherwise be read until the call
//   times out): past it the stream ends with an error answer, as past `maxMessageBytes`;
// - a redirect is followed only within the server's origin (same-origin-fetch.ts).
import type { StreamableHTTPClientTransportOptions } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { boundedBody, byteMeter } from '../bounded-body.ts';
import { sameOriginFetch } from '../same-origin-fetch.ts';

type FetchLike = NonNullable<StreamableHTTPClientTransportOptions['fetch']>;

/** The most one MCP message (a JSON body, an SSE event) may take: the SDK's bound on a stdio message. */
export const MAX_MESSAGE_BYTES = 10 * 1024 * 1024;
/** GET streams (the server's own, resumed ones) start at most this often. */
const MIN_GET_INTERVAL_MS = 1000;
/** How fast the server's own stream (its notifications and requests) is read. */
const GET_STREAM_BYTES_PER_S = 256 * 1024;
/** How many messages a second a server's unasked ones are read (its own stream here; stdout: mcp-stdio.ts). */
export const UNASKED_MESSAGES_PER_S = 100;
/** What the SDK is given of an SSE stream in one turn of the event loop (at most about a hundred small messages). */
const SSE_PIECE_BYTES = 4096;
/**
 * What a request's own stream (the answer to a POST, or its resumption) may carry besides its answer: notifications
 * (progress, logging) and the server's requests. Past it the call fails; its bytes are held to `maxMessageBytes`.
 */
export const MAX_STREAM_MESSAGES = 5000;
/** JSON-RPC's "internal error": what a request whose answer was cut is answered with. */
const INTERNAL_ERROR = -32603;

type RequestId = string | number;

/** The JSON-RPC message a POST carries (the SDK sends one, as JSON text), or undefined. */
function messageOf(init: RequestInit | undefined): { id?: RequestId; method?: string; params?: { requestId?: RequestId } } | undefined {
  if (init?.method !== 'POST' || typeof init.body !== 'string') return undefined;
  try {
    const m = JSON.parse(init.body) as unknown;
    return m && typeof m === 'object' && !Array.isArray(m) ? m : undefined;
  } catch {
    return undefined;
  }
}

const LF = 0x0a;
const CR = 0x0d;
const encoder = new TextEncoder();

/**
 * Counts the bytes of the SSE event being read (from the last blank line), and
 * (with `others`) the events before it and their bytes: `push` answers where in
 * a chunk the event passes `max`, or where an event begins past `others`, or -1;
 * `why` then says which.
 */
function sseEventMeter(max: number, tooLarge: string, others?: { messages: number; bytes: number; why: string }) {
  let eventBytes = 0;
  let lineBytes = 0;
  let afterCr = false;
  let doneEvents = 0;
  let doneBytes = 0;
  const meter = {
    why: tooLarge,
    /** The events ended so far. */
    get events() {
      return doneEvents;
    },
    push(chunk: Uint8Array): number {
      for (let i = 0; i < chunk.length; i++) {
        const b = chunk[i];
        if (b === LF && afterCr) {
          afterCr = false; // CRLF: one line end
          continue;
        }
        afterCr = b === CR;
        if (b === LF || b === CR) {
          if (lineBytes === 0 && eventBytes > 0) {
            // A blank line ends the event.
            doneEvents++;
            doneBytes += eventBytes;
            eventBytes = 0;
          }
          lineBytes = 0;
          continue;
        }
        // An event that begins after more than `others` allows: an answer is the stream's last event, so these were not it.
        if (others && eventBytes === 0 && (doneEvents >= others.messages || doneBytes > others.bytes)) {
          meter.why = others.why;
          return i;
        }
        lineBytes++;
        if (++eventBytes > max) return i;
      }
      return -1;
    },
  };
  return meter;
}

/** A JSON-RPC error answer to `id` saying why. */
const errorAnswer = (id: RequestId, why: string) => ({ jsonrpc: '2.0', id, error: { code: INTERNAL_ERROR, message: why } });

/** Meters a JSON answer's bytes (past `max`: `tooLarge`), and cuts it where it begins when it is a batch (`[`). */
function jsonAnswerMeter(max: number, tooLarge: string) {
  const bytes = byteMeter(max);
  let begun = false;
  const meter = {
    why: tooLarge,
    batch: false,
    push(chunk: Uint8Array): number {
      for (let i = 0; !begun && i < chunk.length; i++) {
        if (chunk[i] === 0x20 || chunk[i] === 0x09 || chunk[i] === LF || chunk[i] === CR) continue;
        begun = true;
        if (chunk[i] === 0x5b) {
          meter.batch = true;
          meter.why = 'the MCP server answered a JSON batch, where one message is the answer: not read';
          return i;
        }
      }
      return bytes(chunk);
    },
  };
  return meter;
}

/** An SSE ending that drops the event being read (the SDK reads only `message` events) and answers `id` with an error. */
function sseCut(id: RequestId | undefined, why: string): Uint8Array {
  const answer = id === undefined ? '' : `data: ${JSON.stringify(errorAnswer(id, why))}\n\n`;
  return encoder.encode(`\nevent: forkline-cut\n\n${answer}`);
}

export function boundedFetch(opts: { maxMessageBytes?: number; deadlineMs: number; fetch?: FetchLike }): FetchLike {
  const max = opts.maxMessageBytes ?? MAX_MESSAGE_BYTES;
  // The config's headers (a key, a token) would follow a redirect anywhere: redirects stay on the server's origin.
  const base = sameOriginFetch(opts.fetch ?? fetch);
  /** The HTTP requests of JSON-RPC requests still open, by request id: a cancellation aborts its own. */
  const open = new Map<RequestId, AbortController>();
  let nextGetAt = 0;
  const tooLarge = `the MCP server's message is over ${max} bytes: cut`;
  const others = {
    messages: MAX_STREAM_MESSAGES,
    bytes: max,
    why: `the MCP server sent over ${MAX_STREAM_MESSAGES} messages or ${max} bytes on the call's stream that are not its answer: cut`,
  };

  return async (url, init) => {
    const message = messageOf(init);
    const cancelled = message?.method === 'notifications/cancelled' ? message.params?.requestId : undefined;
    if (cancelled !== undefined) open.get(cancelled)?.abort(new Error('the MCP request was cancelled'));
    const resumed = new Headers(init?.headers).has('last-event-id');
    if (init?.method === 'GET') {
      // A server that closes its stream at once (with `retry: 0`) is not asked again in a loop.
      const wait = nextGetAt - Date.now();
      nextGetAt = Math.max(nextGetAt, Date.now()) + MIN_GET_INTERVAL_MS;
      if (wait > 0) await abortableSleep(wait, init.signal ?? undefined);
    }
    const controller = new AbortController();
    const signals = [controller.signal];
    if (init?.signal) signals.push(init.signal);
    // The server's own GET stream lives as long as the connection; everything else ends by the deadline.
    if (init?.method !== 'GET' || resumed) signals.push(AbortSignal.timeout(opts.deadlineMs));
    const id = message?.method !== undefined && message.id !== undefined ? message.id : undefined;
    if (id !== undefined) open.set(id, controller);
    const release = (abort?: boolean) => {
      if (id !== undefined && open.get(id) === controller) open.delete(id);
      if (abort) controller.abort(new Error('the MCP response is no longer read'));
    };
    let response: Response;
    try {
      response = await base(url, { ...init, signal: AbortSignal.any(signals) });
    } catch (err) {
      release();
      throw err;
    }
    if (!response.body) {
      release();
      return response;
    }
    const sse = (response.headers.get('content-type') ?? '').split(';')[0].trim().toLowerCase() === 'text/event-stream';
    const done = (gaveUp?: Error) => release(gaveUp !== undefined);
    const own = init?.method === 'GET' && !resumed;
    if (!sse) {
      // A JSON answer is one message (the specification): a batch, which the SDK would check and handle whole
      // in one stretch (100,000 notifications before the answer: seconds), is cut and its request answered with why.
      const meter = jsonAnswerMeter(max, tooLarge);
      const cut = () => (meter.batch && id !== undefined ? encoder.encode(JSON.stringify(errorAnswer(id, meter.why))) : new Error(meter.why));
      return new Response(boundedBody(response.body, { meter: (chunk) => meter.push(chunk), cut, done }), response);
    }
    // The server's own stream is read at a bounded rate (a flood of notifications or requests waits in its socket);
    // a request's stream ends with its answer, so what it carries besides is bounded in count and bytes.
    const meter = sseEventMeter(max, tooLarge, own ? undefined : others);
    const body = boundedBody(response.body, {
      meter: (chunk) => meter.push(chunk),
      cut: () => sseCut(id, meter.why),
      done,
      pieceBytes: SSE_PIECE_BYTES,
      ...(own ? { bytesPerSecond: GET_STREAM_BYTES_PER_S, messagesPerSecond: UNASKED_MESSAGES_PER_S, messages: () => meter.events } : {}),
    });
    return new Response(body, response);
  };
}

function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
