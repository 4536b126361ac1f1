// Turn updates across processes (the sessionTurns subscription, docs/contract.md#graphql-names).
// Turn updates are not in the log: they travel as NOTIFY payloads on
// TURNS_CHANNEL, batched while a NOTIFY is in flight and split below the
// payload limit, and every process (the sender included) re-emits them to its
// local subscribers. A subscriber's queue merges adjacent text deltas and is
// bounded (update-queue.ts).
import { groupsBySize } from '../../core/size-groups.ts';
import { textPieces } from '../../core/text-pieces.ts';
import { mergeDeltas, sameDeltaRun, turnUpdateChars, type TurnUpdate } from '../../agent/turn-updates.ts';
import type { SessionStore } from '../../store/session-store.ts';
import { TURNS_CHANNEL, decodeTurnUpdates, encodeTurnUpdates } from '../../store/channels.ts';
import { MAX_QUEUED_CHARS, MAX_QUEUED_UPDATES, UpdateQueue } from './update-queue.ts';

// What subscribers' queues merge and weigh (tests/subscriptions import them from here).
export { mergeDeltas, turnUpdateChars };

/** Postgres rejects NOTIFY payloads of 8000 bytes or more; keep a margin for the envelope. */
const MAX_PAYLOAD_BYTES = 7000;
/**
 * The most code points of text (a delta's piece, a progress message, a reason) one update carries in a payload: each
 * is at most 6 bytes of its JSON (a control character or a lone surrogate is written `\u0001`), so 6,000 bytes with
 * the update's other fields stay under Postgres's limit. At 1,500 (4 bytes each, escapes left out of the count) a
 * model's or an MCP server's text of control characters made payloads of 9,000 to 12,000 bytes: Postgres refused
 * them, and with them every notification of the process queued beside them (notify-queue.ts).
 */
const MAX_DELTA_CHARS = 1000;
/** First turn update waits this long for company before it is sent. */
const TURN_COALESCE_MS = 10;

export class TurnUpdateRelay {
  private readonly subscribers = new Map<string, Set<UpdateQueue<TurnUpdate>>>();
  private outbox: TurnUpdate[] = [];
  private publishing?: Promise<void>;
  private publishSerial = 0;
  private closed = false;

  constructor(private readonly store: SessionStore) {}

  /** Turn updates of the session from now on, whichever process runs its agent. */
  subscribe(sessionId: string): AsyncIterableIterator<TurnUpdate> {
    let set = this.subscribers.get(sessionId);
    if (!set) this.subscribers.set(sessionId, (set = new Set()));
    const subscribers = set;
    const queue: UpdateQueue<TurnUpdate> = new UpdateQueue<TurnUpdate>({
      max: MAX_QUEUED_UPDATES,
      maxChars: MAX_QUEUED_CHARS,
      weigh: turnUpdateChars,
      merge: mergeDeltas,
      onClose: () => {
        subscribers.delete(queue);
        if (subscribers.size === 0 && this.subscribers.get(sessionId) === subscribers) this.subscribers.delete(sessionId);
      },
    });
    subscribers.add(queue);
    return queue;
  }

  /** Sends a turn update to every process's subscribers. */
  publish(update: TurnUpdate): void {
    if (this.closed) return;
    this.outbox.push(update);
    if (!this.publishing) this.publishing = this.flush();
  }

  /** A TURNS_CHANNEL payload (from any process, this one included): its updates to local subscribers. */
  received(payload: string) {
    // Every process receives every turn's updates: with no subscriber here, the payload is not even parsed.
    if (this.subscribers.size === 0) return;
    for (const u of decodeTurnUpdates<TurnUpdate>(payload) ?? []) {
      const set = this.subscribers.get(u.sessionId);
      if (set) for (const s of set) s.push(u);
    }
  }

  /** The session is gone: its subscribers' streams end. */
  endSession(sessionId: string) {
    for (const s of this.subscribers.get(sessionId) ?? []) s.close();
  }

  subscriberCount() {
    let n = 0;
    for (const set of this.subscribers.values()) n += set.size;
    return n;
  }

  /** Stops publishing (what is queued is still sent) and ends every subscriber's stream. */
  async close(): Promise<void> {
    this.closed = true;
    await this.publishing;
    for (const set of this.subscribers.values()) for (const s of set) s.close();
  }

  // Updates queued while one NOTIFY is in flight go out together, in order.
  private async flush(): Promise<void> {
    await new Promise((r) => setTimeout(r, TURN_COALESCE_MS));
    try {
      while (this.outbox.length) {
        const batch = this.outbox;
        this.outbox = [];
        const payloads = groupsBySize(
          sizedPayloadItems(batch, (_u, json) => json),
          MAX_PAYLOAD_BYTES,
        ).map((u) => encodeTurnUpdates(++this.publishSerial, u));
        await Promise.all(payloads.map((p) => this.store.notifications.post(TURNS_CHANNEL, p)));
      }
    } finally {
      this.publishing = undefined;
    }
  }
}

/** The first MAX_DELTA_CHARS code points of `text` (a surrogate pair is never split). */
const firstChars = (text: string) => (text.length <= MAX_DELTA_CHARS ? text : Array.from(text).slice(0, MAX_DELTA_CHARS).join(''));

/**
 * Groups updates into NOTIFY payloads below the size limit, in order: adjacent
 * deltas are merged, long ones split. Exported for tests.
 */
export function turnPayloads(updates: TurnUpdate[]): TurnUpdate[][] {
  return groupsBySize(
    sizedPayloadItems(updates, (u) => u),
    MAX_PAYLOAD_BYTES,
  );
}

/**
 * The updates as payload items (`item(update, its JSON)`) with their sizes:
 * adjacent deltas merged, long ones split, a call's arguments left out where
 * they alone pass the limit. Each update is serialized once: the sender sends
 * the JSON it measured.
 */
function sizedPayloadItems<T>(updates: TurnUpdate[], item: (u: TurnUpdate, json: string) => T): Array<{ item: T; bytes: number }> {
  // A run of a step's deltas becomes one update, its text joined once (not an update and a string per delta merged).
  const merged: TurnUpdate[] = [];
  for (let i = 0; i < updates.length;) {
    const u = updates[i];
    let end = i + 1;
    while (end < updates.length && sameDeltaRun(u, updates[end])) end++;
    merged.push(end - i === 1 ? u : { ...u, text: updates.slice(i, end).reduce((t, d) => t + (d.text ?? ''), '') });
    i = end;
  }
  const pieces: TurnUpdate[] = [];
  for (const u of merged) {
    const text = u.kind === 'TEXT_DELTA' ? (u.text ?? '') : '';
    if (text.length <= MAX_DELTA_CHARS) pieces.push(u);
    else for (const piece of textPieces(text, MAX_DELTA_CHARS)) pieces.push({ ...u, text: piece });
  }
  return pieces.map((piece) => {
    let u = piece;
    let json = JSON.stringify(u);
    let bytes = Buffer.byteLength(json) + 1;
    // A call's arguments (and a decision's reason, a tool's progress message) may be far larger than a payload: live
    // subscribers get the update without the arguments and with the reason and text cut (the log's replay holds the
    // arguments and reason whole).
    if (bytes > MAX_PAYLOAD_BYTES) {
      u = { ...u, arguments: undefined, ...(u.reason ? { reason: firstChars(u.reason) } : {}), ...(u.text ? { text: firstChars(u.text) } : {}) };
      json = JSON.stringify(u);
      bytes = Buffer.byteLength(json) + 1;
    }
    return { item: item(u, json), bytes };
  });
}
