// What one WebSocket may have queued for its client, whatever writes to it:
// graphql-ws's own sends and the direct writer (graphql/ws-delivery.ts) both go
// through the socket's `send`, so the check sits there, once, after every send
// (nothing else grows the queue). A socket past the cap is closed with the code
// of a subscriber that does not read and SUBSCRIBER_TOO_SLOW (docs/api.md); its
// client resumes with `afterSeq`. Writers see the socket closed and stop.
import type { WebSocket, WebSocketServer } from 'ws';
import { UNRESPONSIVE_CLOSE_CODE } from './ws-liveness.ts';

/** Every socket of `wss` is closed once its queued output passes `max` bytes; `onTooSlow` is told of each (metrics). */
export function capQueuedOutput(wss: WebSocketServer, max: number, onTooSlow?: () => void): void {
  if (!Number.isFinite(max)) return;
  wss.on('connection', (socket: WebSocket) => {
    const send = socket.send;
    socket.send = function (this: WebSocket, ...args: Parameters<WebSocket['send']>) {
      send.apply(this, args);
      if (this.readyState !== this.OPEN || this.bufferedAmount <= max) return;
      this.close(UNRESPONSIVE_CLOSE_CODE, `SUBSCRIBER_TOO_SLOW: over ${max} bytes queued`);
      onTooSlow?.();
    } as WebSocket['send'];
  });
}
