// Request bodies and plain JSON answers outside yoga: the body limit and the
// UTF-8 rule (core/input-rules.ts) of /graphql, /agui and /recordings, and
// their error replies.
import type http from 'node:http';
import { decodeUtf8, INVALID_UTF8 } from '../core/input-rules.ts';
import { jsonTextRefusal } from '../core/storable.ts';
import { REQUEST_TOO_LARGE } from '../core/errors.ts';

/** A request refused before its door answers it (the guard's words: status, code, message, headers). */
export interface Refusal {
  status: number;
  code: string;
  message: string;
  headers: Record<string, string>;
}

export function reply(res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) {
  res.writeHead(status, { 'content-type': 'application/json; charset=utf-8', 'cache-control': 'no-store', ...headers }).end(JSON.stringify(body));
}

export const replyError = (res: http.ServerResponse, status: number, code: string, message: string, headers?: Record<string, string>) =>
  reply(res, status, { errors: [{ message, extensions: { code } }] }, headers);

/** A door's words for a body over its limit. */
export interface TooLarge {
  code: string;
  message: string;
}

/** A door's own bounds of the JSON its body may hold — values, below every door's, and distinct object keys — and what it tells a body past one. */
export interface DoorJsonBounds {
  values: number;
  keys: number;
  advice: (past: 'values' | 'keys') => string;
}
export const BODY_TOO_LARGE: TooLarge = { code: REQUEST_TOO_LARGE, message: 'Request body too large' };

/**
 * Answers 413. A client sending a body often reads nothing until it has sent
 * all of it, and a connection closed under it is reset: the reset can destroy
 * the 413 before the client reads it. So the rest of the body is read and
 * dropped while the answer goes out with `Connection: close`, and the
 * connection ends with the lingering close of body-deadlines.ts (bounded in
 * time and by the body's minimum rate).
 */
export function refuseTooLarge(req: http.IncomingMessage, res: http.ServerResponse, refusal: TooLarge = BODY_TOO_LARGE) {
  req.resume();
  replyError(res, 413, refusal.code, refusal.message, { connection: 'close' });
}

export const hasBody = (req: http.IncomingMessage) => req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;

/**
 * Reads a request body within `limit` bytes, as strict UTF-8: its bytes and
 * text, or undefined when it was answered here (413 over the limit, or past
 * the JSON bounds — `bounds` a door's own —, 400 for invalid UTF-8) or
 * cut. The body is read with 'data' events, not an async
 * iterator: leaving one early destroys the request, and the socket with it.
 */
export async function readBody(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  limit: number,
  refusal: TooLarge = BODY_TOO_LARGE,
  headers?: Record<string, string>,
  bounds?: DoorJsonBounds,
): Promise<{ bytes: Buffer; text: string } | undefined> {
  if (Number(req.headers['content-length'] ?? 0) > limit) return void refuseTooLarge(req, res, refusal);
  const read = arrived(req, limit) ?? (await readArriving(req, limit));
  if (read === 'cut') {
    // A malformed or cut body: Node's HTTP parser answers the client (400) or the client is gone.
    res.destroy();
    return undefined;
  }
  if (read === 'too large') return void refuseTooLarge(req, res, refusal);
  // Before anything decodes or parses it: parsing and checking cost per value and per level, and 17 MiB of JSON may
  // be 8 million values, or 2 MB a million levels (core/storable.ts); the scan reads bytes, and stops at the bound.
  if (refusedJson(res, read, 'the request body', refusal.code, headers, bounds)) return undefined;
  const text = decodeUtf8(read);
  if (text === undefined) return void replyError(res, 400, 'BAD_USER_INPUT', `the request body ${INVALID_UTF8}`, headers);
  return { bytes: read, text };
}

/**
 * Answers JSON text past the bounds of every door's text (core/storable.ts), or the door's own `bounds`, `what`
 * naming it: 413 past the values or keys (with `tooLargeCode`), 400 nested too deep. False when it is within them.
 */
function refusedJson(
  res: http.ServerResponse,
  text: string | Uint8Array,
  what: string,
  tooLargeCode: string,
  headers?: Record<string, string>,
  bounds?: DoorJsonBounds,
): boolean {
  const refused = jsonTextRefusal(text, bounds?.values, bounds?.keys);
  if (refused && refused.past !== 'depth') {
    const advice = bounds ? `, ${bounds.advice(refused.past)}` : ': send fewer events or values per request';
    replyError(res, 413, tooLargeCode, `${what} ${refused.reason}${advice}`, headers);
  } else if (refused) replyError(res, 400, 'BAD_USER_INPUT', `${what} ${refused.reason}`, headers);
  return refused !== undefined;
}

/**
 * The JSON yoga parses out of URL-encoded parameters — a GET's query string, a form-urlencoded body — held to the
 * bounds of a JSON body before it parses them. Their brackets and commas may be percent-encoded, so the text as sent
 * says nothing: each `variables` and `extensions` parameter is checked as yoga reads it, decoded. False when answered.
 */
function paramsWithinBounds(res: http.ServerResponse, encoded: string): boolean {
  for (const [name, value] of new URLSearchParams(encoded)) {
    if ((name === 'variables' || name === 'extensions') && refusedJson(res, value, `the ${name} parameter`, BODY_TOO_LARGE.code)) return false;
  }
  return true;
}

/** yoga parses a form-urlencoded body's parameters (matched here whatever the case, a superset of yoga's match). */
const isFormBody = (req: http.IncomingMessage) => /application\/x-www-form-urlencoded/i.test(req.headers['content-type'] ?? '');

/**
 * Whether all of the request's body has arrived: parsed to its end, or (a
 * small body usually comes with its headers) all of its Content-Length
 * waiting unread in the request's buffer.
 */
export const bodyArrived = (req: http.IncomingMessage) =>
  req.complete || (req.headers['transfer-encoding'] === undefined && req.readableLength === Number(req.headers['content-length']));

/**
 * What this module knows of a request, kept on the request itself: whether its
 * whole body was taken from its buffer before its end of message was parsed,
 * and its text as withinBodyLimit read it. Not in a WeakMap or WeakSet keyed by
 * the request: each request left an entry there (an ephemeron), V8 drops those
 * only in a full GC, and every young-generation GC in between went over all of
 * them — on the hot reads most of what the server's scavenges copied
 * (npm run bench:read-alternation with BENCH_GC=1).
 */
const TAKEN_WHOLE = Symbol('body taken whole');
const BODY_TEXT = Symbol('body text');
type ReadRequest = http.IncomingMessage & { [TAKEN_WHOLE]?: true; [BODY_TEXT]?: string };

/**
 * Whether a request's body has been read to its end: parsed to its end, or
 * taken whole from its buffer (its end of message is parsed later — an answer
 * written before then has still read everything the client sent).
 */
export const bodyReadWhole = (req: http.IncomingMessage) => req.complete || (req as ReadRequest)[TAKEN_WHOLE] === true;

/**
 * The body when all of it has arrived and nothing reads it yet: taken from
 * the request's buffer at once, without listeners, a promise and the ticks of
 * a flowing stream. Undefined when it is still arriving, over the limit, or
 * being read.
 */
function arrived(req: http.IncomingMessage, limit: number): Buffer | undefined {
  if (req.readableFlowing !== null || req.destroyed || req.readableLength > limit || !bodyArrived(req)) return undefined;
  const bytes = (req.read() as Buffer | null) ?? Buffer.alloc(0);
  (req as ReadRequest)[TAKEN_WHOLE] = true;
  req.resume(); // flowing: the request still ends (its end of message is parsed later), as a body read by events does
  return bytes;
}

/** Reads a body as it arrives: its bytes, 'too large' past `limit`, or 'cut'. */
function readArriving(req: http.IncomingMessage, limit: number): Promise<Buffer | 'too large' | 'cut'> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size <= limit) return void chunks.push(chunk);
      done('too large');
    };
    const onEnd = () => done(Buffer.concat(chunks));
    const onCut = () => done('cut');
    const done = (r: Buffer | 'too large' | 'cut') => {
      req.off('data', onData).off('end', onEnd).off('error', onCut).off('close', onCut);
      req.pause();
      resolve(r);
    };
    req.on('data', onData).on('end', onEnd).on('error', onCut).on('close', onCut);
  });
}

/** The text of a /graphql body withinBodyLimit read (the fast lane parses it; yoga gets the bytes). */
export const bodyTextOf = (req: http.IncomingMessage): string | undefined => (req as ReadRequest)[BODY_TEXT];

/**
 * The body limit and the UTF-8 rule of /graphql, applied before yoga, and the
 * bounds of JSON text to the body and to the JSON yoga takes from URL-encoded
 * parameters (a GET's, a form's); true when yoga (or the fast lane) may go on. yoga's own limit pipes every body
 * through a TransformStream (a stream pipeline, an AbortController and a
 * DOMException per request), which more than halved the throughput of small
 * requests. So the body is read here and handed to yoga as a
 * Buffer (whatwg-node takes a pre-read `req.body`) — unless `mayRead` says no
 * (an unauthenticated request: yoga answers 401 without reading its body).
 */
export async function withinBodyLimit(req: http.IncomingMessage, res: http.ServerResponse, limit: number, mayRead: () => boolean): Promise<boolean> {
  if (Number(req.headers['content-length'] ?? 0) > limit) {
    refuseTooLarge(req, res);
    return false;
  }
  // A GET's operation is its query string: held to a body's bounds (a proxy or --max-http-header-size may let
  // megabytes of it through).
  const query = req.method === 'GET' ? (req.url?.indexOf('?') ?? -1) : -1;
  if (query >= 0 && mayRead() && !paramsWithinBounds(res, req.url!.slice(query + 1))) return false;
  if (!hasBody(req) || !mayRead()) return true;
  const body = await readBody(req, res, limit);
  if (!body) return false;
  if (isFormBody(req) && !paramsWithinBounds(res, body.text)) return false;
  (req as { body?: Buffer }).body = body.bytes;
  (req as ReadRequest)[BODY_TEXT] = body.text;
  return true;
}
