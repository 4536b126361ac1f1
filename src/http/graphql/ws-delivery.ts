// sessionEvents over graphql-ws at wire speed. graphql-ws would execute the
// selection and serialise the result once per event per subscriber; here an
// event's payload is made once per selection (event-projection.ts) and the
// same bytes go to every subscriber with that selection, written straight to
// its socket: all events available at once in one corked write. The
// subscription itself stays graphql-ws's (subscribe, complete, errors): the
// iterator handed to it yields nothing and ends when delivery ends.
//
// A socket that does not keep up stops being written to past HIGH_WATER bytes
// queued, by every subscription of the socket and in the middle of a batch;
// its stream stays where it was, and resumes from the shared window or its own
// pages of the log once the socket drains. Memory per slow socket is bounded
// by HIGH_WATER and one frame per subscription; a socket whose queue passes
// its cap whatever the writer is closed by its own send (http/ws-output-cap.ts;
// http/ws-liveness.ts closes a dead one).
//
// The choice is made here, not in the resolver (which only maps the field onto
// live delivery): useWsDelivery takes a graphql-ws sessionEvents operation
// whose selection has a projection and delivers the resolver's stream itself.
import type net from 'node:net';
import { WebSocket } from 'ws';
import { createSourceEventStream, getArgumentValues, getOperationAST, Kind, type FragmentDefinitionNode } from 'graphql';
import { isAsyncIterable, type Plugin } from 'graphql-yoga';
import { MessageType, stringifyMessage } from 'graphql-ws';
import { EventStream } from '../../host/live/event-window.ts';
import type { StoredEvent } from '../../store/session-log.ts';
import { eventProjection, type EventProjection } from './event-projection.ts';
import { responseTooLarge } from '../../graphql/plugins/response-size.ts';

const HIGH_WATER = 1024 * 1024;

/** Payloads kept per session and selection: subscribers near each other's position share them. */
const PAYLOADS_KEPT = 4096;
/**
 * And at most this many bytes of them, or 16 payloads of the largest size
 * sent if that is less: events may be megabytes each (the oldest go first).
 */
const PAYLOAD_BYTES_KEPT = 16 * 1024 * 1024;

/** The graphql-ws operation a resolver runs in: its socket and subscription id. */
export interface WsOperation {
  /** graphql-ws's `extra.socket`: frames go out through ws's public send. */
  socket: WebSocket;
  /**
   * The TCP socket ws writes `socket`'s frames to, corked around a batch of
   * frames so a batch leaves in one write, not one per frame. ws has no public
   * cork and keeps that socket in a private field (`_socket`), so it is taken
   * from graphql-ws's public `extra.request`: the upgrade request, whose
   * `socket` is the one ws was handed (node's 'upgrade' event passes
   * `req.socket`). tests/http/graphql/ws-cork.test.ts fails if graphql-ws or
   * ws stop making that the same socket.
   */
  raw: net.Socket;
  id: string;
  delivery: WsDelivery;
}

/** The subscription field delivered directly. */
const DIRECT_FIELD = 'sessionEvents';

/**
 * Over graphql-ws, a sessionEvents subscription with a plain selection
 * (event-projection.ts) is written straight to the socket, one payload per
 * event for all subscribers; anything else is executed as usual.
 */
export function useWsDelivery(): Plugin {
  return {
    onSubscribe({ args, setSubscribeFn }) {
      const ws = (args.contextValue as { ws?: WsOperation }).ws;
      if (!ws) return;
      const operation = getOperationAST(args.document, args.operationName);
      const [field, ...more] = operation?.selectionSet.selections ?? [];
      if (more.length || field?.kind !== Kind.FIELD || field.name.value !== DIRECT_FIELD) return;
      const fragments: Record<string, FragmentDefinitionNode> = {};
      for (const d of args.document.definitions) if (d.kind === Kind.FRAGMENT_DEFINITION) fragments[d.name.value] = d;
      const def = args.schema.getSubscriptionType()?.getFields()[DIRECT_FIELD];
      if (!def) return;
      const projection = eventProjection({
        fieldNodes: [field],
        fragments,
        returnType: def.type,
        path: { key: field.alias?.value ?? field.name.value, prev: undefined, typename: undefined },
      });
      if (!projection) return;
      setSubscribeFn(async (a) => {
        // The resolver's checks and its stream; errors answer as they would have.
        const source = await createSourceEventStream(a);
        if (!isAsyncIterable(source) || !(source instanceof EventStream)) return source;
        const { sessionId } = getArgumentValues(def, field, a.variableValues ?? undefined) as { sessionId: string };
        return ws.delivery.deliver(source, ws, sessionId, projection);
      });
    },
  };
}

interface PayloadGroup {
  refs: number;
  bySeq: Map<number, Buffer>;
  /** Bytes of the payloads in bySeq. */
  bytes: number;
}

/** An event's payload, or the result sent instead of one over the response ceiling (the subscription ends with it). */
type Payload = Buffer | { tooLarge: Buffer };

export class WsDelivery {
  private readonly groups = new Map<string, PayloadGroup>();
  /** Payloads serialised and frames written since start (tests, metrics). */
  readonly counts = { payloads: 0, frames: 0 };

  /** `maxPayloadBytes`: the response ceiling (FORKLINE_MAX_RESPONSE_BYTES), which each event's payload is held to as a query's response is. */
  private readonly keptBytesPerGroup: number;
  constructor(private readonly maxPayloadBytes: number) {
    this.keptBytesPerGroup = Math.min(PAYLOAD_BYTES_KEPT, 16 * maxPayloadBytes);
  }

  /** Bytes of payloads kept for subscribers to share, all groups together (tests). */
  keptBytes(): number {
    let n = 0;
    for (const g of this.groups.values()) n += g.bytes;
    return n;
  }

  /** Events of `stream` to `op`'s socket as graphql-ws `next` messages; the iterator graphql-ws gets. */
  deliver(stream: EventStream, op: WsOperation, sessionId: string, projection: EventProjection): AsyncIterableIterator<never> {
    const groupKey = `${sessionId}\n${projection.key}`;
    let group = this.groups.get(groupKey);
    if (!group) this.groups.set(groupKey, (group = { refs: 0, bySeq: new Map(), bytes: 0 }));
    group.refs++;
    const g = group;
    const payloadOf = (e: StoredEvent): Payload => {
      let p = g.bySeq.get(e.seq);
      if (!p) {
        const made = projection.payloadWithin(e, this.maxPayloadBytes);
        if (typeof made !== 'string') return { tooLarge: Buffer.from(JSON.stringify(responseTooLarge(made.over, this.maxPayloadBytes))) };
        p = Buffer.from(made);
        this.counts.payloads++;
        g.bySeq.set(e.seq, p);
        g.bytes += p.length;
        while (g.bySeq.size > PAYLOADS_KEPT || (g.bytes > this.keptBytesPerGroup && g.bySeq.size > 1)) {
          const [seq, oldest] = g.bySeq.entries().next().value!;
          g.bySeq.delete(seq);
          g.bytes -= oldest.length;
        }
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

/**
 * graphql-ws's `next` message for subscription `id` around a payload that is
 * already JSON text: graphql-ws frames (and validates) the message with an
 * empty payload, and the shared payload bytes take the place of its `{}`.
 */
export function nextMessageFrame(id: string): (payload: Buffer) => Buffer {
  const empty = stringifyMessage<MessageType.Next>({ id, type: MessageType.Next, payload: {} });
  const at = empty.lastIndexOf('{}'); // the payload is the message's last member
  const head = Buffer.from(empty.slice(0, at));
  const tail = Buffer.from(empty.slice(at + 2));
  return (payload) => Buffer.concat([head, payload, tail]);
}

async function write(stream: EventStream, { socket, raw, id }: WsOperation, payloadOf: (e: StoredEvent) => Payload, counts: { frames: number }): Promise<void> {
  const frame = nextMessageFrame(id);
  const open = () => socket.readyState === WebSocket.OPEN;
  // Until the socket has taken its queue down to HIGH_WATER (or closed).
  const drained = async () => {
    while (socket.bufferedAmount > HIGH_WATER && open()) {
      await new Promise<void>((resolve) => {
        const go = () => (raw.off('drain', go), socket.off('close', go), resolve());
        raw.once('drain', go);
        socket.once('close', go);
      });
    }
  };
  for (;;) {
    // Before writing, not only after: the socket's other subscriptions may have filled it meanwhile.
    await drained();
    const batch = await stream.nextBatch();
    if (!batch) return;
    await drained();
    if (!open()) return void stream.close();
    raw.cork();
    try {
      for (let i = 0; i < batch.length; i++) {
        const payload = payloadOf(batch[i]);
        if (!Buffer.isBuffer(payload)) {
          // Its refusal, then the end: a later event sent after it would leave a gap the client did not see.
          socket.send(frame(payload.tooLarge), { binary: false });
          counts.frames++;
          return void stream.close();
        }
        socket.send(frame(payload), { binary: false });
        counts.frames++;
        if (!open()) return void stream.close(); // closed by its send past its cap (http/ws-output-cap.ts)
        if (socket.bufferedAmount > HIGH_WATER && i + 1 < batch.length) {
          raw.uncork();
          await drained();
          if (!open()) return void stream.close();
          raw.cork();
        }
      }
    } finally {
      raw.uncork();
    }
  }
}
