// When the client of an operation has gone: its statements are cancelled
// (graphql/plugins/statement-deadlines.ts; the HTTP doors: door-statements.ts), so a closed connection does not
// keep Postgres busy reading an answer nobody will get. Read when the pool
// looks (db/statement-deadlines.ts): nothing is set up per request.
import type http from 'node:http';
import type { WebSocket } from 'ws';

/** What the pool reads to know the client went (db/statement-deadlines.ts ClientGone). */
interface ClientGone {
  readonly aborted: boolean;
}

/** A client-gone that can also be waited on: `signal` aborts when the client goes (made on first read, then kept). */
export interface ClientGoneSignal extends ClientGone {
  readonly signal: AbortSignal;
}

/** Aborted with `why` once `source` closes with the client gone (at once if it has already). */
function closedSignal(source: { once(event: 'close', listener: () => void): unknown }, gone: () => boolean, why: string): AbortSignal {
  const controller = new AbortController();
  if (gone()) controller.abort(new Error(why));
  else source.once('close', () => gone() && controller.abort(new Error(why)));
  return controller.signal;
}

/**
 * Gone once the connection closed before the response was sent. Classes, not
 * object literals with a getter: V8 allocates a literal's accessor pair in the
 * old generation, so its closure kept every request's response (its socket,
 * request and body) past the young-generation GCs, promoted, until the next
 * full GC.
 */
class ResponseGone implements ClientGoneSignal {
  private gone?: AbortSignal;
  constructor(private readonly res: http.ServerResponse) {}
  get aborted(): boolean {
    return this.res.destroyed && !this.res.writableFinished;
  }
  /** Only an operation that waits (a queued import) reads it: the listener is set up then, not per request. */
  get signal(): AbortSignal {
    return (this.gone ??= closedSignal(this.res, () => this.aborted, 'the client closed its connection'));
  }
}

/** One signal per WebSocket, however many of its operations wait on it: a listener each would pile up on a long-lived socket. */
const socketSignals = new WeakMap<WebSocket, AbortSignal>();

/** Gone once the WebSocket is closing or closed. */
class SocketGone implements ClientGoneSignal {
  constructor(private readonly socket: WebSocket) {}
  get aborted(): boolean {
    return this.socket.readyState >= this.socket.CLOSING;
  }
  get signal(): AbortSignal {
    let signal = socketSignals.get(this.socket);
    if (!signal) socketSignals.set(this.socket, (signal = closedSignal(this.socket, () => this.aborted, 'the client closed its WebSocket')));
    return signal;
  }
}

export function responseGone(res: http.ServerResponse): ClientGoneSignal {
  return new ResponseGone(res);
}

export function socketGone(socket: WebSocket): ClientGoneSignal {
  return new SocketGone(socket);
}
