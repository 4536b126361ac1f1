// The agent's fold cache is bounded by the heap its folds hold, estimated from
// what each holds: the estimate must follow the heap (text alone undercounts it
// about three times), and the cache must keep to its bound.
import { randomUUID } from 'node:crypto';
import v8 from 'node:v8';
import vm from 'node:vm';
import { afterAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { FoldCache, SessionFold } from '../../src/agent/session-fold.ts';
import { Conversation } from '../../src/core/model-request.ts';
import type { LogEvent } from '../../src/core/events.ts';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;

/** Events as the store reads them (parsed JSON): turns whose steps call tools, or short question-and-answer turns. */
function sessionLog(turns: number, shape: 'tools' | 'short'): LogEvent[] {
  const out: LogEvent[] = [];
  const push = (type: string, data: unknown) => out.push(JSON.parse(JSON.stringify({ seq: out.length, type, data })) as LogEvent);
  push('session/title', { title: 'estimate' });
  for (let t = 1; t <= turns; t++) {
    const inputId = randomUUID();
    const text = shape === 'tools' ? `message ${t}: ${'lorem ipsum '.repeat(20 + ((t * 7) % 40))}` : `question ${t} about something`;
    push('inbox/add', { inputId, text });
    push('inbox/remove', { inputId, reason: 'taken' });
    push('turn/start', { turn: t, inputId });
    const steps = shape === 'tools' ? 3 : 1;
    for (let s = 1; s <= steps; s++) {
      push('step/start', { turn: t, step: s });
      const calls =
        s === steps
          ? []
          : ['clock', 'note_write', 'write_file'].slice(0, s === 1 ? 3 : 2).map((name) => ({
              id: randomUUID(),
              name,
              arguments: JSON.stringify({ path: 'notes/f.md', content: 'line\n'.repeat(30) }),
              effect: 'side-effects',
            }));
      push('model/message', { turn: t, step: s, text: s === steps ? `Echo: ${'lorem ipsum '.repeat(8)}` : '', toolCalls: calls });
      for (const c of calls)
        push('tool/result', { turn: t, step: s, callId: c.id, resultId: randomUUID(), status: 'ok', content: 'line 1\n'.repeat(30), name: c.name });
      push('step/end', { turn: t, step: s, reason: 'completed' });
    }
    push('turn/end', { turn: t, reason: 'completed' });
  }
  return out;
}

/** The heap the folds of these logs hold once the logs themselves are gone, per fold; and the folds. */
function measure(count: number, turns: number, shape: 'tools' | 'short') {
  gc();
  const before = process.memoryUsage().heapUsed;
  const logs = Array.from({ length: count }, () => sessionLog(turns, shape));
  const folds = logs.map((events, i) => {
    const fold = new SessionFold(`s${i}`);
    fold.apply(events);
    fold.conversation.messages(); // rendered, as after a turn
    return fold;
  });
  logs.length = 0;
  gc();
  const heldPerFold = (process.memoryUsage().heapUsed - before) / count;
  return { heldPerFold, folds };
}

const mean = (folds: SessionFold[], of: (f: SessionFold) => number) => folds.reduce((n, f) => n + of(f), 0) / folds.length;

describe('fold cache', () => {
  it.each([
    ['turns with tool calls', 40, 20, 'tools'],
    ['short turns', 10, 1000, 'short'],
  ] as const)("a fold's estimated bytes follow the heap it holds (%s)", (_, count, turns, shape) => {
    const { heldPerFold, folds } = measure(count, turns, shape);
    const estimate = mean(folds, (f) => f.approxBytes);
    const chars = mean(folds, (f) => f.conversation.approxChars);
    expect(heldPerFold).toBeGreaterThan(2 * chars); // why text is not the measure
    expect(estimate / heldPerFold).toBeGreaterThan(0.8);
    expect(estimate / heldPerFold).toBeLessThan(1.6);
  });

  it('keeps to its bound in bytes, the least recently used going first, and refuses a fold larger than the bound', () => {
    const folds = Array.from({ length: 30 }, (_, i) => {
      const f = new SessionFold(`s${i}`);
      f.apply(sessionLog(5, 'tools'));
      return f;
    });
    const each = folds[0].approxBytes;
    const cache = new FoldCache(1000, Math.floor(each * 10.5));
    for (const f of folds) cache.put(f);
    expect(cache.size).toBe(10);
    expect(cache.bytes).toBeLessThanOrEqual(each * 10.5);
    expect(cache.has('s29') && cache.has('s20')).toBe(true);
    expect(cache.has('s19')).toBe(false);

    const big = new SessionFold('big');
    big.apply(sessionLog(60, 'tools'));
    expect(big.approxBytes).toBeGreaterThan(each * 10.5);
    cache.put(big);
    expect(cache.has('big')).toBe(false);
    expect(cache.size).toBe(10);
  });

  it("the host's cache is bounded by bytes, not by a count: more than 1,000 waiting sessions keep their folds", () => {
    // A burst of new sessions' inputs, each continuing a fold of its own until its claim (SessionHost.inputQueued).
    const cache = new FoldCache(undefined, 64 * 1024 * 1024);
    for (let i = 0; i < 3_000; i++) {
      const f = new SessionFold(`waiting${i}`);
      f.apply([{ seq: 0, type: 'inbox/add', data: { inputId: randomUUID(), text: 'what time is it?\n!call clock' } } as LogEvent]);
      cache.put(f);
    }
    expect(cache.size).toBe(3_000);
    expect(cache.has('waiting0')).toBe(true); // the oldest: the first a claim takes
  });

  it('a conversation restored from a checkpoint is estimated by what it holds: its messages, then its history once read', () => {
    const c = new Conversation();
    c.setInstructions('be brief');
    c.setInstructions('be very brief');
    c.applyAll(sessionLog(6, 'tools'));
    c.apply({ seq: 10_000, type: 'surface/replace', data: { fromSeq: 1, toSeq: 40, content: 'summary '.repeat(50) } });
    const snap = JSON.parse(JSON.stringify(c.snapshot()));
    const restored = Conversation.restore(snap.head, snap.messages, () => snap.history, JSON.stringify(snap.messages).length);
    expect(restored.messages()).toEqual(c.messages());
    // Before its history is read it holds the rendered messages only: less than the fold that made it, not nothing.
    const beforeHistory = restored.approxBytes;
    expect(beforeHistory).toBeGreaterThan(c.approxBytes * 0.3);
    expect(beforeHistory).toBeLessThan(c.approxBytes);
    // Read (a compaction's range renders history again), it holds entries and messages as separate copies: at least the original's.
    restored.messagesThrough(10);
    expect(restored.approxBytes).toBeGreaterThanOrEqual(c.approxBytes);
    expect(restored.approxBytes).toBeLessThan(c.approxBytes * 2);
  });

  it.each([
    ['turns with tool calls', 40, 20, 'tools'],
    ['short turns', 10, 1000, 'short'],
  ] as const)("a restored conversation's estimated bytes follow the heap it holds (%s)", (_, count, turns, shape) => {
    const checkpoints = Array.from({ length: count }, () => {
      const snap = new Conversation().applyAll(sessionLog(turns, shape)).snapshot();
      return { head: JSON.stringify(snap.head), messages: JSON.stringify(snap.messages) };
    });
    gc();
    const before = process.memoryUsage().heapUsed;
    const restored = checkpoints.map(({ head, messages }) =>
      Conversation.restore(JSON.parse(head), JSON.parse(messages), () => ({ entries: [], inputs: [], answered: [] }), messages.length),
    );
    gc();
    const heldPerConversation = (process.memoryUsage().heapUsed - before) / count;
    const estimate = restored.reduce((n, c) => n + c.approxBytes, 0) / count;
    expect(estimate / heldPerConversation).toBeGreaterThan(0.8);
    expect(estimate / heldPerConversation).toBeLessThan(1.6);
  });

  it('a restore takes the bytes of its messages from the checkpoint, without walking them: the ones it recorded, or else from their text', () => {
    const c = new Conversation().applyAll(sessionLog(6, 'tools'));
    const snap = JSON.parse(JSON.stringify(c.snapshot()));
    const text = JSON.stringify(snap.messages);
    // Messages that cannot be read: a restore that walked them throws.
    const unread = snap.messages.map(() => Object.defineProperty({}, 'content', { get: () => expect.unreachable('a message read at restore') }));
    const recorded = Conversation.restore(snap.head, unread, () => snap.history, text.length).approxBytes;
    expect(recorded).toBe(Conversation.restore(snap.head, snap.messages, () => snap.history, 0).approxBytes);
    expect(recorded).toBeGreaterThan(text.length);
    // A checkpoint written before its messages' bytes were recorded: their text's length says about as much.
    const { messagesBytes: _, ...older } = snap.head;
    const fromText = Conversation.restore(older, unread, () => snap.history, text.length).approxBytes;
    expect(fromText / recorded).toBeGreaterThan(0.8);
    expect(fromText / recorded).toBeLessThan(1.25);
  });
});

describe("the host's fold cache bound (FORKLINE_FOLD_CACHE_MAX_BYTES)", () => {
  const apps: TestApp[] = [];
  afterAll(() => Promise.all(apps.map((a) => a.close())));

  /** Event rows the second and third turns of a session read, in an app whose fold cache holds `foldCacheBytes`. */
  async function rowsReadByLaterTurns(foldCacheBytes: number) {
    let counting = false;
    let rows = 0;
    const app = await startTestApp({ foldCacheBytes, onQuery: (sql, n) => void (counting && /FROM "Event"/.test(sql) && (rows += n)) });
    apps.push(app);
    const id = (await app.services.store.createSession({ tenant: 'local' }, { title: 'bound' })).id;
    const send = async (text: string) => {
      await app.services.controller.sendMessage({ tenant: 'local' }, id, text);
      await app.services.host.idle();
    };
    await send('first');
    counting = true;
    await send('second');
    await send('third');
    return rows;
  }

  it('keeps a fold within the bound between turns, and none past it (each turn then reads the log again)', async () => {
    const kept = await rowsReadByLaterTurns(64 * 1024 * 1024);
    const refused = await rowsReadByLaterTurns(1024); // smaller than any fold
    // The input's own statement claimed the session: the kept fold takes it from there, and no turn reads the log.
    expect(kept).toBe(0);
    expect(refused).toBeGreaterThan(10); // the whole log, twice
  });
});

describe('a turn claimed with its input (SessionHost.claimSettled)', () => {
  it('starts without reading the log, and still sees input queued right after the claim', async () => {
    // The statements themselves, so that a failure says which read it was.
    const reads: string[] = [];
    let counting = false;
    const app = await startTestApp({
      onQuery: (sql) => void (counting && /^\s*SELECT[\s\S]*FROM "Event"/.test(sql) && reads.push(sql.replace(/\s+/g, ' ').slice(0, 300))),
    });
    try {
      const { controller, host, store } = app.services;
      const id = (await store.createSession({ tenant: 'local' }, {})).id;
      await host.idle();
      counting = true;
      await controller.sendMessage({ tenant: 'local' }, id, 'first');
      await host.idle();
      // A new session's first turn: its fold is the input alone, and nothing else is read.
      expect(reads).toEqual([]);
      // Two at once: the second lands after the first claimed the session (its own claim finds the slot taken),
      // past the end of the fold the claim made; the runner's first append finds the log moved and reads it.
      await Promise.all([controller.sendMessage({ tenant: 'local' }, id, 'second'), controller.sendMessage({ tenant: 'local' }, id, 'third')]);
      await host.idle();
      const types = (await store.log.range(id, 0, 1_000)).map((e) => e.type);
      expect(types.filter((t) => t === 'inbox/add')).toHaveLength(3);
      expect(types.filter((t) => t === 'inbox/remove')).toHaveLength(3);
      expect(types.filter((t) => t === 'turn/end')).toHaveLength(3);
      expect(types.at(-1)).toBe('turn/end');
    } finally {
      await app.close();
    }
  });

  it('a batch claim of input queued here without room starts from the fold the input continued', async () => {
    let reads = 0;
    let counting = false;
    const app = await startTestApp({
      maxActiveSessions: 1,
      onQuery: (sql) => void (counting && /^\s*SELECT[\s\S]*FROM "Event"/.test(sql) && reads++),
    });
    try {
      const { controller, host, store } = app.services;
      const [busy, queued] = await Promise.all([0, 1].map(async () => (await store.createSession({ tenant: 'local' }, {})).id));
      await controller.sendMessage({ tenant: 'local' }, busy, '!call sleep {"ms": 500}');
      await waitFor(() => host.isRunningHere(busy), { what: 'the slot taken' });
      counting = true;
      await controller.sendMessage({ tenant: 'local' }, queued, 'hello'); // no room: queued, then claimed by a batch claim
      expect(host.isRunningHere(queued)).toBe(false);
      const answered = async () =>
        (await app.db.pool.query(`SELECT "turnCount" = 1 AND status = 'IDLE' AS done FROM "Session" WHERE id = $1`, [queued])).rows[0].done === true;
      await waitFor(answered, { what: 'the queued turn' });
      await host.idle();
      expect(reads).toBe(0);
      const types = (await store.log.range(queued, 0, 100)).map((e) => e.type);
      expect(types).toEqual(['inbox/add', 'inbox/remove', 'turn/start', 'step/start', 'model/message', 'step/end', 'turn/end']);
    } finally {
      await app.close();
    }
  });
});
