// When the client of an operation has gone: its statements are cancelled
// (graphql/plugins/statement-deadlines.ts), so a closed connection does not
// keep Postgres busy reading an answer nobody will get.
import type http from 'node:http';
import type { WebSocket } from 'ws';

/** Aborted when the connection closes before the response was sent. */
export function responseGone(res: http.ServerResponse): AbortSignal {
  const gone = new AbortController();
  res.once('close', () => res.writableFinished || gone.abort());
  return gone.signal;
}

const sockets = new WeakMap<WebSocket, AbortSignal>();

/** Aborted when the WebSocket closes: one signal per socket, whatever the number of its operations. */
export function socketGone(socket: WebSocket): AbortSignal {
  let signal = sockets.get(socket);
  if (!signal) {
    const gone = new AbortController();
    socket.once('close', () => gone.abort());
    sockets.set(socket, (signal = gone.signal));
  }
  return signal;
}
