// How long a connection may hold the server without doing its part.
// HTTP: node's own timers — a connection that sends nothing, or headers that
// never finish, gets 408 after headersMs (node checks every
// connectionsCheckingInterval, so the check runs often enough for the
// timeout); a whole request has requestMs (body-deadlines.ts; a recording
// upload's body only the minimum rate); an idle
// keep-alive connection keepAliveMs; a response its client stops reading
// responseStallMs (stalled-responses.ts). WebSocket: graphql-ws closes a socket
// without `connection_init` after wsInitMs (4408), but its close frame waits
// for the client's answer for 30 s (ws's close handshake) — a client that
// sends nothing does not answer, so such a socket is cut CLOSE_GRACE_MS later.
// A socket past `connection_init` that runs no operation for wsIdleMs holds a
// place of its tenant's cap for nothing: it is closed (1000, which graphql-ws
// clients answer by connecting again when they next need to).
import type http from 'node:http';
import type { WebSocket, WebSocketServer } from 'ws';
import { stallBoundedResponse } from './stalled-responses.ts';

export interface ConnectionTimeouts {
  /** Request headers must be complete within this from the connection's start or its previous request (408). */
  headersMs: number;
  /** A whole request, body included, but a recording upload's (body-deadlines.ts: it has only the rate); 0: none. */
  requestMs: number;
  /** A keep-alive connection idle between requests is closed after this. */
  keepAliveMs: number;
  /** A WebSocket must send `connection_init` within this. */
  wsInitMs: number;
  /** A WebSocket past `connection_init` running no operation (query, mutation, subscription) is closed after this; 0: never. */
  wsIdleMs: number;
  /** A request body must arrive at this many bytes per second over each window (body-deadlines.ts); 0: no minimum. */
  bodyMinBytesPerSecond: number;
  bodyRateWindowMs: number;
  /** A response whose client does not take what is queued for it (a full buffer) within this is cut (stalled-responses.ts); 0: never. */
  responseStallMs: number;
}

export const DEFAULT_TIMEOUTS: ConnectionTimeouts = {
  headersMs: 20_000,
  requestMs: 300_000,
  keepAliveMs: 5_000,
  wsInitMs: 3_000,
  wsIdleMs: 60_000,
  bodyMinBytesPerSecond: 8 * 1024,
  bodyRateWindowMs: 10_000,
  responseStallMs: 60_000,
};

/** A socket told to close gets this long to answer the close frame before its TCP connection is cut. */
const CLOSE_GRACE_MS = 1_000;

/** node:http server options for `t` (createServer's; keepAliveTimeout is set by `applyKeepAlive`); `onStalled`: a response was cut (metrics). */
export function httpServerOptions(t: ConnectionTimeouts, onStalled?: () => void): http.ServerOptions {
  return {
    // A whole request's deadline is per door (body-deadlines.ts: a recording upload has none), node's is server-wide.
    headersTimeout: t.requestMs ? Math.min(t.headersMs, t.requestMs) : t.headersMs,
    requestTimeout: 0,
    connectionsCheckingInterval: Math.max(50, Math.min(5_000, Math.floor(t.headersMs / 4))),
    ServerResponse: stallBoundedResponse(t.responseStallMs, onStalled),
  };
}

export function applyKeepAlive(server: http.Server, t: ConnectionTimeouts) {
  server.keepAliveTimeout = t.keepAliveMs;
}

/** Cuts a WebSocket that has not been admitted (`admitted`: its `connection_init` passed) wsInitMs + grace after it opened. */
export function cutUninitialisedSockets(wss: WebSocketServer, t: ConnectionTimeouts, admitted: (socket: WebSocket) => boolean) {
  wss.on('connection', (socket: WebSocket) => {
    const timer = setTimeout(() => admitted(socket) || socket.terminate(), t.wsInitMs + CLOSE_GRACE_MS);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  });
}

/** After an idle socket's close frame, how long the client has to answer it before the connection is cut. */
const IDLE_CLOSE_GRACE_MS = 5_000;

/** Admitted WebSockets, closed when they run no operation for `idleMs` (0: never). */
export class IdleSockets {
  private readonly lastActive = new WeakMap<WebSocket, number>();

  constructor(private readonly idleMs: number) {}

  /** A socket past `connection_init`; `busy`: whether it runs an operation now (graphql-ws's own record of them). */
  watch(socket: WebSocket, busy: () => boolean): void {
    if (!this.idleMs) return;
    this.lastActive.set(socket, Date.now());
    let timer: NodeJS.Timeout;
    const check = () => {
      const quiet = Date.now() - (this.lastActive.get(socket) ?? 0);
      if (busy() || quiet < this.idleMs) {
        timer = setTimeout(check, busy() ? this.idleMs : this.idleMs - quiet);
        timer.unref();
        return;
      }
      socket.close(1000, `idle: no operation for ${this.idleMs / 1000} s; connect again when needed`);
      timer = setTimeout(() => socket.terminate(), IDLE_CLOSE_GRACE_MS);
      timer.unref();
    };
    timer = setTimeout(check, this.idleMs);
    timer.unref();
    socket.once('close', () => clearTimeout(timer));
  }

  /** An operation of the socket started or ended: its idle time starts again. */
  touch(socket: WebSocket): void {
    if (this.lastActive.has(socket)) this.lastActive.set(socket, Date.now());
  }
}
