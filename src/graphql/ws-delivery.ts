// sessionEvents over graphql-ws at wire speed. graphql-ws would execute the
// selection and serialise the result once per event per subscriber; here an
// event's payload is made once per selection (event-projection.ts) and the
// same bytes go to every subscriber with that selection, written straight to
// its socket: all events available at once in one corked write. The
// subscription itself stays graphql-ws's (subscribe, complete, errors): the
// iterator handed to it yields nothing and ends when delivery ends.
//
// A socket that does not keep up stops being written to past HIGH_WATER bytes
// queued; its stream stays where it was, and resumes from the shared window or
// its own pages of the log once the socket drains. Memory per slow subscriber
// is bounded by HIGH_WATER and one page (ws-liveness.ts closes a dead one).
import type net from 'node:net';
import { WebSocket } from 'ws';
import type { EventStream } from '../host/live/event-window.ts';
import type { StoredEvent } from '../store/session-log.ts';
import type { EventProjection } from './event-projection.ts';

const HIGH_WATER = 1024 * 1024;
/** Payloads kept per session and selection: subscribers near each other's position share them. */
const PAYLOADS_KEPT = 4096;

/** The graphql-ws operation a resolver runs in: its socket and subscription id. */
export interface WsOperation {
  socket: WebSocket;
  id: string;
  delivery: WsDelivery;
}

interface PayloadGroup {
  refs: number;
  bySeq: Map<number, Buffer>;
}

export class WsDelivery {
  private readonly groups = new Map<string, PayloadGroup>();
  /** Payloads serialised and frames written since start (tests, metrics). */
  readonly counts = { payloads: 0, frames: 0 };

  /** Events of `stream` to `op`'s socket as graphql-ws `next` messages; the iterator graphql-ws gets. */
  deliver(stream: EventStream, op: WsOperation, sessionId: string, projection: EventProjection): AsyncIterableIterator<never> {
    const groupKey = `${sessionId}\n${projection.key}`;
    let group = this.groups.get(groupKey);
    if (!group) this.groups.set(groupKey, (group = { refs: 0, bySeq: new Map() }));
    group.refs++;
    const g = group;
    const payloadOf = (e: StoredEvent) => {
      let p = g.bySeq.get(e.seq);
      if (!p) {
        p = Buffer.from(projection.payload(e));
        this.counts.payloads++;
        g.bySeq.set(e.seq, p);
        if (g.bySeq.size > PAYLOADS_KEPT) g.bySeq.delete(g.bySeq.keys().next().value!);
      }
      return p;
    };
    const release = () => {
      if (--g.refs === 0 && this.groups.get(groupKey) === g) this.groups.delete(groupKey);
    };
    const done = write(stream, op, payloadOf, this.counts).finally(release);
    const DONE: IteratorReturnResult<never> = { done: true, value: undefined as never };
    return {
      next: () => done.then(() => DONE),
      return: async () => {
        stream.close();
        await done.catch(() => {});
        return DONE;
      },
      throw: async (err) => {
        stream.close();
        throw err;
      },
      [Symbol.asyncIterator]() {
        return this;
      },
    };
  }

}

async function write(stream: EventStream, { socket, id }: WsOperation, payloadOf: (e: StoredEvent) => Buffer, counts: { frames: number }): Promise<void> {
  const head = Buffer.from(`{"id":${JSON.stringify(id)},"type":"next","payload":`);
  const tail = Buffer.from('}');
  const raw = (socket as unknown as { _socket: net.Socket })._socket;
  for (;;) {
    const batch = await stream.nextBatch();
    if (!batch) return;
    if (socket.readyState !== WebSocket.OPEN) return void stream.close();
    raw.cork();
    try {
      for (const e of batch) socket.send(Buffer.concat([head, payloadOf(e), tail]), { binary: false });
      counts.frames += batch.length;
    } finally {
      raw.uncork();
    }
    while (socket.bufferedAmount > HIGH_WATER && socket.readyState === WebSocket.OPEN) {
      await new Promise<void>((resolve) => {
        const go = () => (raw.off('drain', go), socket.off('close', go), resolve());
        raw.once('drain', go);
        socket.once('close', go);
      });
    }
  }
}
