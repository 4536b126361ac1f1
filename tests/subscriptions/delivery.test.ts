// sessionEvents delivery guarantees: reconnects with afterSeq lose nothing and
// repeat nothing while appends go on; many subscribers see the same run; the
// shared window, the per-subscriber re-reads and a listener reconnect keep
// the order (LiveEvents with tiny pages, driven directly).
import { EventEmitter } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { subscribe, subscribeWs, type Transport } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { openDatabase, type Database } from '../../src/db/database.ts';
import { SessionStore, type StoredEvent } from '../../src/store/session-store.ts';
import { EVENTS_CHANNEL, SESSIONS_CHANNEL, decodeTurnUpdates, encodeTurnUpdates } from '../../src/store/channels.ts';
import { LiveEvents, turnPayloads } from '../../src/host/live/live-events.ts';
import type { PgListener } from '../../src/store/pg-listener.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const EVENTS = `subscription($id: ID!, $after: Int) { sessionEvents(sessionId: $id, afterSeq: $after) { seq } }`;
const title = (i: number) => ({ type: 'session/title', data: { title: `t${i}` } });
const range = (n: number) => Array.from({ length: n }, (_, i) => i);

/** Appends `total` events in batches of 1..4 as fast as the database takes them. */
function appendInBackground(store: SessionStore, id: string, total: number) {
  let written = 0;
  const done = (async () => {
    while (written < total) {
      const n = Math.min(total - written, 1 + (written % 4));
      await store.append(
        id,
        Array.from({ length: n }, (_, i) => title(written + i)),
      );
      written += n;
    }
  })();
  return { done, written: () => written };
}

describe.each<Transport>(['ws', 'sse'])('reconnecting with afterSeq over %s', (transport) => {
  it('while appends continue: no gap, no duplicate', async () => {
    const { id } = await app.services.store.createSession({ tenant: 'local' }, {});
    const total = 400;
    const appender = appendInBackground(app.services.store, id, total);
    const received: number[] = [];
    let after: number | undefined;
    let writtenAtFirstReconnect = 0;
    for (let round = 0; received.length < total; round++) {
      const sub = subscribe(transport, app.url, EVENTS, { id, after });
      // Drop the connection after a few events (the last round reads to the end).
      const want = round < 4 ? 30 + round * 17 : total - received.length;
      await sub.count(want);
      await sub.close();
      const seqs = sub.items.map((i) => i.sessionEvents.seq);
      received.push(...seqs);
      after = received[received.length - 1];
      if (round === 0) writtenAtFirstReconnect = appender.written();
    }
    await appender.done;
    expect(writtenAtFirstReconnect).toBeLessThan(total); // the reconnects happened mid-stream
    expect(received).toEqual(range(total));
  });
});

describe('many subscribers', () => {
  it('200 concurrent subscribers on one session receive every event of a 3-turn run', async () => {
    const id = (await app.ok(`mutation { createSession(input: { title: "crowd" }) { id } }`)).createSession.id as string;
    const subs = Array.from({ length: 200 }, () => subscribeWs(app.url, EVENTS, { id }));
    await Promise.all(subs.map((s) => s.count(1)));
    for (const text of ['!slow 2\none two three four', 'two\n!call clock', '!slow 2\nthree and done']) {
      await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
    }
    await waitFor(async () => (await app.services.store.requireSession({ tenant: 'local' }, id)).turnCount === 3, { what: '3 turns' });
    await app.services.host.idle();
    const { eventCount } = await app.services.store.requireSession({ tenant: 'local' }, id);
    await Promise.all(subs.map((s) => s.count(eventCount)));
    await new Promise((r) => setTimeout(r, 100));
    for (const s of subs) expect(s.items.map((i) => i.sessionEvents.seq)).toEqual(range(eventCount));
    await Promise.all(subs.map((s) => s.close()));
  });
});

describe('LiveEvents with tiny pages and a controllable listener', () => {
  let db: Database;
  let store: SessionStore;
  const listener = new EventEmitter() as unknown as PgListener & EventEmitter;
  let live: LiveEvents;
  beforeAll(async () => {
    db = openDatabase(await createTestDatabase());
    store = new SessionStore(db.pool, toolEffectOf);
    live = new LiveEvents(store, listener, { pageSize: 4, windowSize: 8 });
  });
  afterAll(async () => {
    await live.close();
    await db.close();
  });

  /** Appends and tells LiveEvents the way the real listener would. */
  const append = async (id: string, n: number, from: number) => {
    const out = await store.append(
      id,
      Array.from({ length: n }, (_, i) => title(from + i)),
    );
    listener.emit(EVENTS_CHANNEL, JSON.stringify({ s: id, last: out[out.length - 1].seq }));
  };
  const take = async (it: AsyncIterator<StoredEvent>, n: number, delayMs = 0) => {
    const out: number[] = [];
    while (out.length < n) {
      const r = await it.next();
      if (r.done) break;
      out.push(r.value.seq);
      if (delayMs) await new Promise((res) => setTimeout(res, delayMs));
    }
    return out;
  };

  it('fast and slow subscribers both get every event in order (window, own pages, catch-up)', async () => {
    const { id } = await store.createSession({ tenant: 'local' }, {});
    await append(id, 10, 0);
    const fast = live.sessionEvents(id, -1);
    const slow = live.sessionEvents(id, 3);
    const late = live.sessionEvents(id, 57);
    const writer = (async () => {
      for (let i = 10; i < 60; i += 5) {
        await append(id, 5, i);
        await new Promise((r) => setTimeout(r, 3));
      }
    })();
    const [f, s] = await Promise.all([take(fast, 60), take(slow, 56, 2)]);
    await writer;
    expect(f).toEqual(range(60));
    expect(s).toEqual(range(60).slice(4));
    expect(await take(late, 2)).toEqual([58, 59]);
    for (const it of [fast, slow, late]) await it.return!();
  });

  it('return() ends a waiting subscriber at once', async () => {
    const { id } = await store.createSession({ tenant: 'local' }, {});
    const it = live.sessionEvents(id, -1);
    const pending = it.next();
    await new Promise((r) => setTimeout(r, 20));
    await it.return!();
    expect(await pending).toEqual({ value: undefined, done: true });
  });

  it('after a listener reconnect, subscribers re-read what the lost notifications announced', async () => {
    const { id } = await store.createSession({ tenant: 'local' }, {});
    await append(id, 2, 0);
    const it = live.sessionEvents(id, -1);
    expect(await take(it, 2)).toEqual([0, 1]);
    const next = take(it, 6);
    await store.append(
      id,
      Array.from({ length: 6 }, (_, i) => title(2 + i)),
    ); // notification lost
    await new Promise((r) => setTimeout(r, 20));
    listener.emit('reconnect');
    expect(await next).toEqual([2, 3, 4, 5, 6, 7]);
    await it.return!();
  });

  it('sessionsChanged is confined to the subscriber tenant', async () => {
    const mine = live.sessionsChanged({ tenant: 'local' });
    const theirs = live.sessionsChanged({ tenant: 'other' });
    const { id } = await store.createSession({ tenant: 'local' }, { title: 'changed' });
    listener.emit(SESSIONS_CHANNEL, id);
    const r = await mine.next();
    expect(r.value).toMatchObject({ id, title: 'changed', tenant: 'local' });
    const race = await Promise.race([theirs.next(), new Promise((res) => setTimeout(() => res('nothing'), 100))]);
    expect(race).toBe('nothing');
    await mine.return!();
    await theirs.return!();
  });
});

describe('turn update payloads', () => {
  it('merge adjacent deltas, split long ones below the NOTIFY limit, keep order', () => {
    const u = (kind: TurnUpdate['kind'], text?: string): TurnUpdate => ({ sessionId: 's', kind, turn: 1, step: 1, text });
    const long = 'é'.repeat(5000) + '😀'.repeat(3000);
    const groups = turnPayloads([u('STEP_STARTED'), u('TEXT_DELTA', 'a '), u('TEXT_DELTA', 'b '), u('TEXT_DELTA', long), u('STEP_ENDED')]);
    for (const g of groups) expect(Buffer.byteLength(JSON.stringify({ n: 1e9, u: g }))).toBeLessThan(8000);
    const flat = groups.flat();
    expect(flat[0].kind).toBe('STEP_STARTED');
    expect(flat.at(-1)!.kind).toBe('STEP_ENDED');
    expect(
      flat
        .filter((x) => x.kind === 'TEXT_DELTA')
        .map((x) => x.text)
        .join(''),
    ).toBe(`a b ${long}`);
  });

  it('stay below the NOTIFY limit when each character is 6 bytes of JSON (control characters, lone surrogates)', () => {
    const u = (kind: TurnUpdate['kind'], text: string): TurnUpdate => ({ sessionId: 's', kind, turn: 1, step: 1, callId: 'c'.repeat(200), text });
    const escaped = '\u0001\udc00'.repeat(2500);
    const groups = turnPayloads([u('TEXT_DELTA', escaped), u('TOOL_PROGRESS', escaped.slice(0, 2001))]);
    for (const g of groups) expect(Buffer.byteLength(JSON.stringify({ n: 1e9, u: g }))).toBeLessThan(8000);
    const flat = groups.flat();
    expect(
      flat
        .filter((x) => x.kind === 'TEXT_DELTA')
        .map((x) => x.text)
        .join('') === escaped,
    ).toBe(true);
    expect(flat.find((x) => x.kind === 'TOOL_PROGRESS')!.text === escaped.slice(0, 1000)).toBe(true);
  });

  it('encode as JSON.stringify({ n, u }) of the updates, from their JSON as measured', () => {
    const a: TurnUpdate = { sessionId: 's', kind: 'TEXT_DELTA', turn: 1, step: 2, text: 'say "hi"\n😀' };
    const b: TurnUpdate = { sessionId: 's', kind: 'STEP_ENDED', turn: 1, step: 2, text: undefined };
    const payload = encodeTurnUpdates(7, [JSON.stringify(a), JSON.stringify(b)]);
    expect(payload).toBe(JSON.stringify({ n: 7, u: [a, b] }));
    expect(decodeTurnUpdates<TurnUpdate>(payload)).toEqual([a, { sessionId: 's', kind: 'STEP_ENDED', turn: 1, step: 2 }]);
  });

  it("keep an approval update below the NOTIFY limit: without the call's arguments, its reason cut", () => {
    const big: TurnUpdate = {
      sessionId: 's',
      kind: 'APPROVAL_DECIDED',
      turn: 1,
      step: 1,
      callId: 'c1',
      toolName: 'write_file',
      arguments: JSON.stringify({ content: 'x'.repeat(20_000) }),
      decision: 'denied',
      reason: '😀'.repeat(5000),
      by: 'local',
    };
    const small: TurnUpdate = { ...big, kind: 'APPROVAL_REQUESTED', arguments: '{"path":"a"}', reason: undefined, decision: undefined, by: undefined };
    const groups = turnPayloads([big, small]);
    for (const g of groups) expect(Buffer.byteLength(JSON.stringify({ n: 1e9, u: g }))).toBeLessThan(8000);
    const [sent, kept] = groups.flat();
    expect(sent).toMatchObject({ kind: 'APPROVAL_DECIDED', callId: 'c1', toolName: 'write_file', decision: 'denied', arguments: undefined });
    expect(Array.from(sent.reason!).length).toBeGreaterThan(0);
    expect(kept).toEqual(small); // one that fits travels whole
  });
});
