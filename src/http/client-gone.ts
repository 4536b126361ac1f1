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

/**
 * Gone once the connection closed before the response was sent. Classes, not
 * object literals with a getter: V8 allocates a literal's accessor pair in the
 * old generation, so its closure kept every request's response (its socket,
 * request and body) past the young-generation GCs, promoted, until the next
 * full GC.
 */
class ResponseGone implements ClientGone {
  constructor(private readonly res: http.ServerResponse) {}
  get aborted(): boolean {
    return this.res.destroyed && !this.res.writableFinished;
  }
}

/** Gone once the WebSocket is closing or closed. */
class SocketGone implements ClientGone {
  constructor(private readonly socket: WebSocket) {}
  get aborted(): boolean {
    return this.socket.readyState >= this.socket.CLOSING;
  }
}

export function responseGone(res: http.ServerResponse): ClientGone {
  return new ResponseGone(res);
}

export function socketGone(socket: WebSocket): ClientGone {
  return new SocketGone(socket);
}
