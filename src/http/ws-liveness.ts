// WebSocket liveness for subscribers. graphql-ws's own keep-alive terminated a
// socket that missed one pong (12 s) — which a subscriber that is alive but
// slow to read always does, since its pong waits behind the events it has
// not read — so it lost its subscriptions with 1006 and no reason. Writers
// wait for a slow socket (graphql-ws awaits each send; graphql/ws-delivery.ts stops at
// 1 MB queued), so a slow reader costs bounded memory: there is no reason to
// drop it while it reads. A socket is closed only when it neither answers pings
// nor takes any data for `deadAfterMs`, with a close code and a reason the
// client sees. That close frame waits behind what the client has not read:
// terminating the socket a fixed 5 s later dropped both (1006 and no reason
// again, for a client stalled longer). So a closed socket is kept until its
// frame is in the kernel's hands (delivered then, even once we let go), or
// for `closeGraceMs` (what it holds is bounded: graphql/ws-delivery.ts).
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import type { ServerOptions, WebSocket, WebSocketServer } from 'ws';
import { systemClock, type Clock } from '../core/clock.ts';

export const UNRESPONSIVE_CLOSE_CODE = 4408;
/** After its close frame reached the kernel, a socket gets this long to finish the closing handshake. */
const HANDSHAKE_MS = 5000;
/** A subscriber silent this long is closed; a closed one keeps what is queued ahead of its close frame this long. */
export const DEFAULT_LIVENESS = { deadAfterMs: 60_000, closeGraceMs: 5 * 60_000 };

export interface LivenessOptions {
  pingMs?: number;
  deadAfterMs?: number;
  /** How long a socket closed for silence keeps what is queued ahead of its close frame, for a client that reads again. */
  closeGraceMs?: number;
  /** Called when a socket is closed for silence (metrics; tests wait for theirs). */
  onUnresponsive?: (socket: WebSocket) => void;
  /** What pings and silences are timed on (default: the system clock). */
  clock?: Clock;
}

/**
 * WebSocketServer options: ws destroys a socket `closeTimeout` after sending
 * its close frame, whether or not the frame left (30 s by default), so it is
 * set past what watchLiveness allows. (ws has the option; @types/ws lacks it.)
 */
export function closingOptions(opts: LivenessOptions = {}): ServerOptions {
  const closeTimeout = Math.max(opts.closeGraceMs ?? DEFAULT_LIVENESS.closeGraceMs, opts.deadAfterMs ?? DEFAULT_LIVENESS.deadAfterMs) + HANDSHAKE_MS;
  return { closeTimeout } as ServerOptions;
}

export function watchLiveness(wss: WebSocketServer, opts: LivenessOptions = {}) {
  const pingMs = opts.pingMs ?? 12_000;
  const deadAfterMs = opts.deadAfterMs ?? DEFAULT_LIVENESS.deadAfterMs;
  const closeGraceMs = opts.closeGraceMs ?? DEFAULT_LIVENESS.closeGraceMs;
  const clock = opts.clock ?? systemClock;
  wss.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    // The TCP socket ws writes to (its own reference is private): the upgrade request's (graphql/ws-delivery.ts says why).
    const tcp: Socket | undefined = request.socket;
    /** Our pings' own bytes (2 a ping): the kernel takes them whether or not the client reads. */
    let pingBytes = 0;
    /** Bytes the kernel has taken, pings aside: grows while the client reads, even slowly. */
    const handedOver = () => (tcp ? tcp.bytesWritten - tcp.writableLength - pingBytes : 0);
    let lastSign = clock.now();
    let lastHandedOver = handedOver();
    socket.on('pong', () => (lastSign = clock.now()));
    let closingSince: number | undefined;
    const timer = clock.setInterval(() => {
      if (socket.readyState !== socket.OPEN) {
        // Closing (the client asked): not a silent subscriber, but one whose
        // handshake does not finish within deadAfterMs is ended all the same.
        closingSince ??= clock.now();
        if (clock.now() - closingSince > deadAfterMs) {
          clock.clearInterval(timer);
          socket.terminate();
        }
        return;
      }
      const now = handedOver();
      if (now > lastHandedOver) lastSign = clock.now(); // it read something: slow, but alive
      lastHandedOver = now;
      if (clock.now() - lastSign > deadAfterMs) {
        clock.clearInterval(timer);
        socket.close(
          UNRESPONSIVE_CLOSE_CODE,
          `no answer to pings and nothing read for ${Math.round(deadAfterMs / 1000)} s; reconnect (sessionEvents with afterSeq resumes)`,
        );
        opts.onUnresponsive?.(socket);
        const closedAt = clock.now();
        let handedOverAt: number | undefined;
        const closing = clock.setInterval(
          () => {
            if (!tcp || tcp.writableLength === 0) handedOverAt ??= clock.now(); // the close frame included
            const now = clock.now();
            if ((handedOverAt !== undefined && now - handedOverAt >= HANDSHAKE_MS) || now - closedAt >= closeGraceMs) socket.terminate();
          },
          Math.min(pingMs, HANDSHAKE_MS),
        );
        closing.unref();
        socket.on('close', () => clock.clearInterval(closing));
        return;
      }
      socket.ping();
      pingBytes += 2;
    }, pingMs);
    timer.unref();
    socket.on('close', () => clock.clearInterval(timer));
  });
}
