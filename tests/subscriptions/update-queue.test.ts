// A subscriber's queue of pushed updates (update-queue.ts, an async iterator with a
// coalescing buffer): order kept, adjacent deltas merged, the latest row per
// key, overflow closes with an error, and return() unregisters at once. No
// database: the relay is fed payloads as the listener would.
import { describe, expect, it } from 'vitest';
import { MAX_QUEUED_UPDATES, ROOM_UPDATES, TOO_SLOW_MESSAGE, UpdateQueue, type UpdateQueueOptions } from '../../src/host/live/update-queue.ts';
import { TurnUpdateRelay, mergeDeltas, turnUpdateChars } from '../../src/host/live/turn-update-relay.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';
import type { SessionStore } from '../../src/store/session-store.ts';

const delta = (text: string, step = 1): TurnUpdate => ({ sessionId: 's', kind: 'TEXT_DELTA', turn: 1, step, text });
const mark = (kind: TurnUpdate['kind'], step = 1): TurnUpdate => ({ sessionId: 's', kind, turn: 1, step });
const tick = () => new Promise((r) => setTimeout(r, 0));

function queue<T>(opts: Partial<UpdateQueueOptions<T>> = {}) {
  const closes: number[] = [];
  const q = new UpdateQueue<T>({ max: 100, onClose: () => closes.push(1), ...opts });
  return { q, closes };
}

async function drain<T>(q: AsyncIterator<T>, n: number): Promise<T[]> {
  const out: T[] = [];
  for (let i = 0; i < n; i++) {
    const r = await q.next();
    if (r.done) break;
    out.push(r.value);
  }
  return out;
}

describe('UpdateQueue', () => {
  it('cuts a reader past its characters too: a merged delta grows without adding an update', async () => {
    const { q, closes } = queue<TurnUpdate>({ merge: mergeDeltas, weigh: turnUpdateChars, maxChars: 20_000 });
    q.push(mark('STEP_STARTED'));
    for (let i = 0; i < 99; i++) q.push(delta('x'.repeat(100)));
    expect(closes).toEqual([]);
    q.push(delta('x'.repeat(10_000))); // 10,100 + 10,000: past the bound, still two updates
    expect(closes).toEqual([1]);
    await expect(q.next()).rejects.toThrow(TOO_SLOW_MESSAGE);
  });

  it('a producer that waits for room() is never cut, and goes on once the reader took enough', async () => {
    const { q, closes } = queue<TurnUpdate>({ max: 100, weigh: turnUpdateChars });
    let added = 0;
    const producing = (async () => {
      for (let i = 0; i < 1000; i++) {
        const wait = q.room();
        if (wait) await wait;
        q.add(mark('STEP_ENDED', i));
        added++;
      }
    })();
    await tick();
    expect(added).toBe(ROOM_UPDATES + 1); // waits past the room, far below the bound
    const read = await drain(q, 1000);
    await producing;
    expect(closes).toEqual([]);
    expect(read.map((u) => u.step)).toEqual(Array.from({ length: 1000 }, (_, i) => i));
  });

  it('keeps order and merges adjacent deltas the reader has not taken yet', async () => {
    const { q } = queue<TurnUpdate>({ merge: mergeDeltas });
    q.push(mark('STEP_STARTED'));
    q.push(delta('a'));
    q.push(delta('b'));
    q.push(delta('c', 2)); // another step: not merged
    q.push(mark('STEP_ENDED', 2));
    q.push(delta('d', 2));
    q.push(delta('e', 2));
    expect(await drain(q, 5)).toEqual([mark('STEP_STARTED'), delta('ab'), delta('c', 2), mark('STEP_ENDED', 2), delta('de', 2)]);
    // Taken updates are not merged into: a waiting read gets the next one as it is.
    const waiting = q.next();
    q.push(delta('f'));
    q.push(delta('g'));
    expect((await waiting).value).toEqual(delta('f'));
    expect((await q.next()).value).toEqual(delta('g'));
    await q.return();
  });

  it('keeps the latest update per key, in the place of the first', async () => {
    const { q } = queue<{ id: string; v: number }>({ keyOf: (x) => x.id });
    q.push({ id: 'a', v: 1 });
    q.push({ id: 'b', v: 1 });
    q.push({ id: 'a', v: 2 });
    q.push({ id: 'c', v: 1 });
    q.push({ id: 'b', v: 2 });
    expect(await drain(q, 3)).toEqual([
      { id: 'a', v: 2 },
      { id: 'b', v: 2 },
      { id: 'c', v: 1 },
    ]);
    q.push({ id: 'a', v: 3 }); // a taken row does not absorb the next one
    expect((await q.next()).value).toEqual({ id: 'a', v: 3 });
    await q.return();
  });

  it('closes a reader past max queued updates with an error, dropping what was queued', async () => {
    const { q, closes } = queue<number>({ max: 3 });
    const first = q.next();
    q.push(0); // straight to the waiting read
    expect(await first).toEqual({ value: 0, done: false });
    for (let i = 1; i <= 3; i++) q.push(i);
    expect(closes).toEqual([]);
    q.push(4);
    expect(closes).toEqual([1]);
    await expect(q.next()).rejects.toThrow(TOO_SLOW_MESSAGE);
    q.push(5); // ignored once closed
    expect(await q.next()).toEqual({ value: undefined, done: true });
    expect(closes).toEqual([1]);
  });

  it('merged and replaced updates do not count towards max', async () => {
    const { q, closes } = queue<TurnUpdate>({ max: 2, merge: mergeDeltas });
    q.push(mark('STEP_STARTED'));
    for (let i = 0; i < 1000; i++) q.push(delta('x'));
    expect(closes).toEqual([]);
    const [, merged] = await drain(q, 2);
    expect(merged.text).toBe('x'.repeat(1000));
    await q.return();
  });

  it('overflow before the first read: that read fails', async () => {
    const { q, closes } = queue<number>({ max: 2 });
    q.push(1);
    q.push(2);
    q.push(3);
    expect(closes).toEqual([1]);
    await expect(q.next()).rejects.toThrow(TOO_SLOW_MESSAGE);
  });

  it('return() unregisters at once and ends a waiting read', async () => {
    const { q, closes } = queue<number>();
    const pending = q.next();
    await tick();
    const returned = q.return();
    expect(closes).toEqual([1]); // before anything is awaited
    expect(await pending).toEqual({ value: undefined, done: true });
    expect(await returned).toEqual({ value: undefined, done: true });
    q.push(1);
    expect(await q.next()).toEqual({ value: undefined, done: true });
    expect(closes).toEqual([1]);
  });

  it('return() before any read unregisters too; updates pushed before the first read are kept', async () => {
    const a = queue<number>();
    void a.q.return();
    expect(a.closes).toEqual([1]);
    expect(await a.q.next()).toEqual({ value: undefined, done: true });

    const b = queue<number>();
    b.q.push(1);
    b.q.push(2);
    expect(await drain(b.q, 2)).toEqual([1, 2]);
    await b.q.return();
  });

  it('close() from the producer ends the reader: a waiting read is done, queued updates are dropped', async () => {
    const a = queue<number>();
    const pending = a.q.next();
    await tick();
    a.q.close();
    expect(await pending).toEqual({ value: undefined, done: true });

    const b = queue<number>();
    b.q.push(1);
    await b.q.next();
    b.q.push(2);
    b.q.close();
    expect(b.closes).toEqual([1]);
    expect(await b.q.next()).toEqual({ value: undefined, done: true });
  });

  it('throw() unregisters and rejects with the error', async () => {
    const { q, closes } = queue<number>();
    q.push(1);
    await q.next();
    await expect(q.throw(new Error('boom'))).rejects.toThrow('boom');
    expect(closes).toEqual([1]);
  });

  it('reads waiting together get the next updates in order; an error close rejects a waiting read once', async () => {
    const { q, closes } = queue<number>({ max: 1 });
    const [a, b] = [q.next(), q.next()];
    q.push(1);
    q.push(2);
    expect(await Promise.all([a, b])).toEqual([
      { value: 1, done: false },
      { value: 2, done: false },
    ]);
    const waiting = q.next();
    q.close(new Error(TOO_SLOW_MESSAGE));
    await expect(waiting).rejects.toThrow(TOO_SLOW_MESSAGE);
    expect(await q.next()).toEqual({ value: undefined, done: true });
    expect(closes).toEqual([1]);
  });

  it('works with for await (break returns)', async () => {
    const { q, closes } = queue<number>();
    for (let i = 0; i < 5; i++) q.push(i);
    const seen: number[] = [];
    for await (const n of q) {
      seen.push(n);
      if (n === 2) break;
    }
    expect(seen).toEqual([0, 1, 2]);
    expect(closes).toEqual([1]);
  });
});

describe('TurnUpdateRelay subscribers (no database)', () => {
  const relay = () => new TurnUpdateRelay({} as SessionStore);
  const payload = (...u: TurnUpdate[]) => JSON.stringify({ n: 1, u });

  it('a slow subscriber gets deltas merged, in order; others are unaffected', async () => {
    const r = relay();
    const slow = r.subscribe('s');
    const other = r.subscribe('t');
    r.received(payload(mark('TURN_STARTED'), delta('he'), delta('llo')));
    r.received(payload(delta(' there'), mark('TURN_ENDED')));
    expect(await drain(slow, 3)).toEqual([mark('TURN_STARTED'), delta('hello there'), mark('TURN_ENDED')]);
    const none = await Promise.race([other.next(), tick().then(() => 'nothing')]);
    expect(none).toBe('nothing');
    expect(r.subscriberCount()).toBe(2);
    await slow.return!();
    await other.return!();
    expect(r.subscriberCount()).toBe(0);
  });

  it('return() mid-wait unregisters at once; the session ending completes the others', async () => {
    const r = relay();
    const a = r.subscribe('s');
    const b = r.subscribe('s');
    const waitingA = a.next();
    const waitingB = b.next();
    await tick();
    void a.return!();
    expect(r.subscriberCount()).toBe(1);
    expect(await waitingA).toEqual({ value: undefined, done: true });
    r.endSession('s');
    expect(r.subscriberCount()).toBe(0);
    expect(await waitingB).toEqual({ value: undefined, done: true });
  });

  it('a subscriber that never reads is closed with the error past the bound', async () => {
    const r = relay();
    const stuck = r.subscribe('s');
    const steps = Array.from({ length: MAX_QUEUED_UPDATES + 1 }, (_, i) => mark('STEP_STARTED', i));
    for (let i = 0; i < steps.length; i += 1000) r.received(payload(...steps.slice(i, i + 1000)));
    expect(r.subscriberCount()).toBe(0);
    await expect(stuck.next()).rejects.toThrow(TOO_SLOW_MESSAGE);
  });
});
