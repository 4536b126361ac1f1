// What a request body may cost the server in time and connections
// (docs/operations.md "Threat model"):
//
// - A request answered before its body was read (a refusal: 401, 403, 413,
//   429, …) closes its connection: `Connection: close`, then a short lingering
//   close — the rest of the body is read and dropped only while it keeps
//   arriving at the minimum rate (a client that sends its whole body before
//   reading still sees its answer instead of a reset), and the socket is
//   destroyed within about a second once it does not. Node would otherwise
//   keep the connection alive and read a slow body until the request timeout.
// - A body being read (an authenticated upload to /recordings, a /graphql or
//   /agui body) must arrive at FORKLINE_HTTP_BODY_MIN_BYTES_PER_S over each
//   window of FORKLINE_HTTP_BODY_RATE_WINDOW_MS, or the request is answered
//   408 and its connection cut. A window in which the server itself was not
//   reading (it was busy, or writing to a full disk) does not count against
//   the client.
// - A body must have arrived whole within FORKLINE_HTTP_REQUEST_TIMEOUT_MS
//   (408 and the connection cut), but a recording upload's: it may be
//   gigabytes, and 21 MB over a 0.5 Mbit/s link takes 6 minutes, so the rate
//   alone bounds it (node's requestTimeout is server-wide: it is 0, and the
//   deadline is kept here, per request).
// - At most FORKLINE_MAX_CONNECTIONS_PER_ADDRESS connections from one client
//   address (IPv6: one /64, as the auth throttle counts) at a time, per
//   process: one more is destroyed as it is accepted.
import type http from 'node:http';
import type net from 'node:net';
import { bodyArrived, bodyReadWhole, hasBody, replyError } from './http-body.ts';
import { addressKey } from './auth-throttle.ts';

export interface BodyRate {
  /** Bytes per second a body must arrive at, measured over each window; 0: no minimum. */
  minBytesPerSecond: number;
  windowMs: number;
}

/** A refused body is read and dropped at most this long and this much before the connection is cut. */
const DRAIN_MAX_MS = 30_000;
const DRAIN_MAX_BYTES = 256 * 1024 * 1024;
/** A refused body's rate is checked over windows this long (or the body window, when shorter). */
const DRAIN_WINDOW_MS = 1_000;

/**
 * Applies the body rules to one request with a body (the router calls it
 * before any door): the minimum rate while it is read, and the close of its
 * connection when it is answered before it was read whole.
 */
export function watchBody(req: http.IncomingMessage, res: http.ServerResponse, rate: BodyRate, deadlineMs: number): void {
  if (!hasBody(req)) return;
  closeWhenAnsweredUnread(req, res, rate);
  // A small body usually arrives with its headers, and node has parsed all
  // that arrived by the next tick: a body all there by then has no rate to
  // keep, so only one still arriving gets the rate's timer and listeners.
  if (rate.minBytesPerSecond > 0 || deadlineMs > 0) process.nextTick(enforceWhileArriving, req, res, rate, deadlineMs);
}

function enforceWhileArriving(req: http.IncomingMessage, res: http.ServerResponse, rate: BodyRate, deadlineMs: number): void {
  if (bodyArrived(req) || req.socket.destroyed) return;
  if (rate.minBytesPerSecond > 0) enforceRate(req, res, rate);
  if (deadlineMs > 0) enforceDeadline(req, res, deadlineMs);
}

/** The whole body by `deadlineMs`, or 408 and the connection cut (what node's requestTimeout answered). */
function enforceDeadline(req: http.IncomingMessage, res: http.ServerResponse, deadlineMs: number): void {
  const timer = setTimeout(() => {
    stop();
    if (req.complete || req.socket.destroyed) return;
    refuseSlowBody(req, res, `the request did not arrive whole within ${deadlineMs} ms (FORKLINE_HTTP_REQUEST_TIMEOUT_MS)`);
  }, deadlineMs);
  timer.unref();
  const stop = untilBodyEnds(req, () => clearTimeout(timer));
}

/**
 * 408 (unless an answer has begun) and the connection cut: a body that did not keep to its rate or deadline. The
 * request is destroyed too: once its answer is written node no longer ties it to its socket, so a door still
 * reading it (an upload's pipeline to its spool) would wait for its end forever, holding its tenant's upload place.
 */
function refuseSlowBody(req: http.IncomingMessage, res: http.ServerResponse, message: string): void {
  const socket = req.socket;
  if (!res.headersSent) replyError(res, 408, 'REQUEST_TIMEOUT', message, { connection: 'close' });
  req.destroy(new Error(message));
  socket.destroy();
}

/** `clear` once the request's body has ended or its socket closed (a keep-alive socket carries many requests: nothing of this one stays on it); returns it, wired, to call sooner. */
function untilBodyEnds(req: http.IncomingMessage, clear: () => void): () => void {
  const socket = req.socket;
  const stop = () => {
    clear();
    req.off('end', stop);
    socket.off('close', stop);
  };
  req.once('end', stop);
  socket.once('close', stop);
  return stop;
}

function closeWhenAnsweredUnread(req: http.IncomingMessage, res: http.ServerResponse, rate: BodyRate): void {
  const socket = req.socket; // kept: a request destroyed mid-body (a pipeline's error) lets go of it
  const writeHead = res.writeHead;
  // Every answer goes through writeHead (res.end without it calls it too).
  res.writeHead = function (this: http.ServerResponse, ...args: Parameters<typeof writeHead>) {
    res.writeHead = writeHead;
    // Read whole, not `req.complete`: a body taken from the buffer (http-body.ts) and answered at once, before
    // node parsed its end of message, is read all the same, and closing its keep-alive connection cost every
    // such request (a query answered without I/O) a new connection.
    if (!bodyReadWhole(req) && !res.headersSent) {
      res.setHeader('connection', 'close'); // node then calls socket.destroySoon() once the answer is written
      if (!socket.destroyed) lingerThenClose(socket, rate);
      req.resume(); // a door that stopped reading (413 mid-body) drops the rest, so the answer is not lost to a reset
    }
    return writeHead.apply(this, args);
  } as typeof writeHead;
}

/** The socket's destroySoon (what node calls after a `Connection: close` answer): a lingering close instead of an immediate one. */
function lingerThenClose(socket: net.Socket, rate: BodyRate): void {
  const windowMs = Math.min(DRAIN_WINDOW_MS, rate.windowMs);
  const minBytes = Math.max(1, Math.floor(((rate.minBytesPerSecond || 1) * windowMs) / 1000));
  socket.destroySoon = function (this: net.Socket) {
    this.end(); // our FIN once the answer is flushed; what still arrives is read and dropped
    const started = Date.now();
    const base = this.bytesRead;
    let last = base;
    const timer = setInterval(() => {
      const now = this.bytesRead;
      const slow = now - last < minBytes;
      last = now;
      if (slow || Date.now() - started >= DRAIN_MAX_MS || now - base > DRAIN_MAX_BYTES) this.destroy();
    }, windowMs);
    timer.unref();
    this.once('close', () => clearInterval(timer));
    this.once('end', () => this.destroy()); // the client is done too
  };
}

function enforceRate(req: http.IncomingMessage, res: http.ServerResponse, rate: BodyRate): void {
  const socket = req.socket;
  const minBytes = Math.floor((rate.minBytesPerSecond * rate.windowMs) / 1000);
  let last = socket.bytesRead;
  const timer = setInterval(() => {
    if (req.complete || socket.destroyed) return stop();
    const now = socket.bytesRead;
    const moved = now - last;
    last = now;
    // Not the client's doing: nothing reads the body yet, or what arrived waits unread (backpressure).
    if (req.readableFlowing !== true || req.readableLength > 0) return;
    if (moved >= minBytes) return;
    stop();
    refuseSlowBody(req, res, `the request body arrived slower than ${rate.minBytesPerSecond} bytes/s (FORKLINE_HTTP_BODY_MIN_BYTES_PER_S)`);
  }, rate.windowMs);
  timer.unref();
  const stop = untilBodyEnds(req, () => clearInterval(timer));
}

/** Open connections per client address, capped at accept time (0: no cap). */
export class AddressConnections {
  private readonly open = new Map<string, number>();

  constructor(readonly max: number) {}

  /** A connection just accepted: counted, or destroyed when its address has `max` open already. */
  accept(socket: net.Socket): boolean {
    if (!this.max) return true;
    const address = addressKey(socket.remoteAddress ?? '');
    const n = this.open.get(address) ?? 0;
    if (n >= this.max) {
      socket.destroy();
      return false;
    }
    this.open.set(address, n + 1);
    socket.once('close', () => {
      const left = (this.open.get(address) ?? 1) - 1;
      if (left > 0) this.open.set(address, left);
      else this.open.delete(address);
    });
    return true;
  }
}
