// When the client of an operation has gone: its statements are cancelled
// (graphql/plugins/statement-deadlines.ts), so a closed connection does not
// keep Postgres busy reading an answer nobody will get. Read when the pool
// looks (db/statement-deadlines.ts): nothing is set up per request.
import type http from 'node:http';
import type { WebSocket } from 'ws';

/** What the pool reads to know the client went (db/statement-deadlines.ts ClientGone). */
interface ClientGone {
  readonly aborted: boolean;
}

/** Gone once the connection closed before the response was sent. */
export function responseGone(res: http.ServerResponse): ClientGone {
  return {
    get aborted() {
      return res.destroyed && !res.writableFinished;
    },
  };
}

/** Gone once the WebSocket is closing or closed. */
export function socketGone(socket: WebSocket): ClientGone {
  return {
    get aborted() {
      return socket.readyState >= socket.CLOSING;
    },
  };
}
