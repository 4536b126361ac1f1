// The log contract (docs/contract.md#log, docs/contract.md#deletion) as one suite that each
// implementation runs through a small initializer, beside the fork spec
// (fork-spec.ts): append rules, reads through a fork's lineage, and deletion.
// The pure core, the store and the GraphQL API run it.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/core/events.ts';
import { LogState, MAX_STEP_CALLS } from '../../src/core/log-state.ts';
import { REFERENCE_LOG } from './reference-log.ts';

export interface LogSpecEvent {
  seq: number;
  type: string;
  data: unknown;
  inherited?: boolean;
  synthetic?: boolean;
}

/** What a refused call reports: its error code, and for a broken rule the rule and the seq it would have taken. */
export interface Refusal {
  code: string;
  rule?: string;
  seq?: number;
}

export interface LogSpecInitializer {
  setup?(): Promise<void>;
  teardown?(): Promise<void>;
  createSession(): Promise<string>;
  /** Appends a batch; resolves undefined when written, or the refusal (nothing written). */
  append(id: string, events: NewEvent[], opts?: { expectedEventCount?: number }): Promise<Refusal | undefined>;
  /** Events after `afterSeq` (-1: from the start), at most `first`. */
  page(id: string, afterSeq: number, first: number): Promise<LogSpecEvent[]>;
  /** The counters the implementation reports; null when the session does not exist. */
  counters(id: string): Promise<{ eventCount: number; turnCount: number; pendingInputCount: number; status: string } | null>;
  fork(id: string, atSeq: number): Promise<string>;
  /** Deletes; resolves the deleted ids, or the refusal. */
  deleteSession(id: string, withDescendants?: boolean): Promise<string[] | Refusal>;
  /** False for a writer whose input cannot mark an event synthetic (the runner protocol: only repair writes closers): the rows about synthetic events do not apply. */
  writesSynthetic?: boolean;
}

const call = (id: string) => ({ id, name: 'clock', arguments: '{}' });
/** Turn 1 open in step 1 with one unanswered call: where most rules can be broken. */
const OPEN_STEP: NewEvent[] = [
  { type: 'inbox/add', data: { inputId: 'in_1', text: 'hi' } },
  { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
  { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
  { type: 'step/start', data: { turn: 1, step: 1 } },
  { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [call('c1')] } },
];
const result = (callId: string, extra: Partial<{ status: string; resultId: string }> = {}) => ({
  type: 'tool/result',
  data: { turn: 1, step: 1, callId, resultId: extra.resultId ?? `r_${callId}`, status: extra.status ?? 'ok', content: 'done' },
});

/** Batches that break one rule (docs/contract.md#log, core/log-state.ts `violation`) after a base log: refused, nothing written. */
export const APPEND_RULE_ROWS: Array<{ name: string; base: NewEvent[]; batch: NewEvent[]; rule: string; at: number }> = [
  { name: 'a second open turn', base: OPEN_STEP, batch: [{ type: 'turn/start', data: { turn: 2, inputId: 'x' } }], rule: 'turn bracket', at: 0 },
  { name: 'a turn numbered out of order', base: [], batch: [{ type: 'turn/start', data: { turn: 2, inputId: 'x' } }], rule: 'turn numbering', at: 0 },
  { name: 'a step outside any turn', base: [], batch: [{ type: 'step/start', data: { turn: 1, step: 1 } }], rule: 'step bracket', at: 0 },
  {
    name: 'a step numbered backwards',
    base: [...OPEN_STEP, result('c1'), { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } }],
    batch: [{ type: 'step/start', data: { turn: 1, step: 1 } }],
    rule: 'step numbering',
    at: 0,
  },
  {
    // Every reader serves step numbers as GraphQL Int: a larger one made the session's turns unreadable.
    name: 'a step numbered past 2^31 - 1',
    base: OPEN_STEP.slice(0, 3),
    batch: [{ type: 'step/start', data: { turn: 1, step: 2 ** 31 } }],
    rule: 'step numbering',
    at: 0,
  },
  {
    name: 'a call id used twice in a step',
    base: OPEN_STEP,
    batch: [{ type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [call('c1')] } }],
    rule: 'call ids',
    at: 0,
  },
  {
    // Its repair (a result per call, then the ends) must fit one append: a step past the bound was a session no claim could repair.
    name: 'a step of more calls than a step holds, over two messages',
    base: OPEN_STEP,
    batch: [{ type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: Array.from({ length: MAX_STEP_CALLS }, (_, i) => call(`x${i}`)) } }],
    rule: 'step calls',
    at: 0,
  },
  { name: 'an orphan result', base: OPEN_STEP, batch: [result('c9')], rule: 'result pairing', at: 0 },
  { name: 'a duplicate result, later in the batch', base: OPEN_STEP, batch: [result('c1'), result('c1', { resultId: 'r2' })], rule: 'result pairing', at: 1 },
  { name: 'an input id already pending', base: [OPEN_STEP[0]], batch: [OPEN_STEP[0]], rule: 'inbox', at: 0 },
  { name: 'removing an input that is not pending', base: [], batch: [OPEN_STEP[1]], rule: 'inbox', at: 0 },
  {
    name: 'a replacement of a later range',
    base: [],
    batch: [{ type: 'surface/replace', data: { fromSeq: 0, toSeq: 0, content: 's' } }],
    rule: 'surface range',
    at: 0,
  },
  { name: 'a synthetic result without a repair cause', base: OPEN_STEP, batch: [{ ...result('c1'), synthetic: true }], rule: 'synthetic closer', at: 0 },
  {
    // Forkline's own agent ends a step `completed` once each call has its result: accepted, the log told of calls answered that never were.
    name: 'a step ended completed with a call unanswered',
    base: OPEN_STEP,
    batch: [{ type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } }],
    rule: 'unanswered call',
    at: 0,
  },
  {
    // A step closes once, before its turn: a turn/end over an open step left it closed by nothing.
    name: 'a turn ended while its step is open',
    base: OPEN_STEP,
    batch: [result('c1'), { type: 'turn/end', data: { turn: 1, reason: 'completed' } }],
    rule: 'step bracket',
    at: 1,
  },
];

const strip = ({ seq, type, data, inherited, synthetic }: LogSpecEvent) => ({ seq, type, data, inherited: !!inherited, synthetic: !!synthetic });

async function wholeLog(impl: LogSpecInitializer, id: string): Promise<LogSpecEvent[]> {
  const all: LogSpecEvent[] = [];
  for (;;) {
    const page = await impl.page(id, all.length - 1, 100);
    all.push(...page);
    if (page.length < 100) return all;
  }
}

export function logSpec(name: string, impl: LogSpecInitializer) {
  describe(`log spec: ${name}`, () => {
    beforeAll(async () => impl.setup?.());
    afterAll(async () => impl.teardown?.());

    describe('appends', () => {
      it('number events 0, 1, 2, … across batches, with no gap and nothing reused', async () => {
        const id = await impl.createSession();
        const before = (await impl.counters(id))!.eventCount;
        expect(await impl.append(id, REFERENCE_LOG.slice(0, 10))).toBeUndefined();
        expect(await impl.append(id, REFERENCE_LOG.slice(10))).toBeUndefined();
        const log = await wholeLog(impl, id);
        expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i));
        expect(log.slice(before).map(({ type, data }) => ({ type, data }))).toEqual(REFERENCE_LOG);
        // The counters are the one reducer's over the same log.
        const state = new LogState().applyAll(log);
        expect(await impl.counters(id)).toEqual({
          eventCount: state.nextSeq,
          turnCount: state.turnCount,
          pendingInputCount: state.pendingInputCount,
          status: state.openTurn === undefined ? 'IDLE' : 'RUNNING',
        });
      });

      for (const row of APPEND_RULE_ROWS.filter((r) => impl.writesSynthetic !== false || !r.batch.some((e) => e.synthetic))) {
        it(`refuse ${row.name} (${row.rule}), naming the seq, and write nothing of the batch`, async () => {
          const id = await impl.createSession();
          if (row.base.length) expect(await impl.append(id, row.base)).toBeUndefined();
          const before = await wholeLog(impl, id);
          expect(await impl.append(id, row.batch)).toEqual({ code: 'BAD_USER_INPUT', rule: row.rule, seq: before.length + row.at });
          expect((await wholeLog(impl, id)).map(strip)).toEqual(before.map(strip));
        });
      }

      it('refuse an unknown event type, and a payload its type does not admit', async () => {
        const id = await impl.createSession();
        const before = (await impl.counters(id))!.eventCount;
        expect(await impl.append(id, [{ type: 'session/colour', data: {} }])).toMatchObject({ code: 'BAD_USER_INPUT' });
        expect(await impl.append(id, [{ type: 'session/title', data: { title: 7 } }])).toMatchObject({ code: 'BAD_USER_INPUT' });
        expect((await impl.counters(id))!.eventCount).toBe(before);
      });

      it('made conditional on the log length, refuse a writer whose view is stale (SESSION_BUSY)', async () => {
        const id = await impl.createSession();
        const n = (await impl.counters(id))!.eventCount;
        expect(await impl.append(id, [REFERENCE_LOG[0]], { expectedEventCount: n })).toBeUndefined();
        expect(await impl.append(id, [REFERENCE_LOG[0]], { expectedEventCount: n })).toMatchObject({ code: 'SESSION_BUSY' });
        expect((await impl.counters(id))!.eventCount).toBe(n + 1);
      });
    });

    describe('reads through a lineage', () => {
      // parent: the reference log; child: forked mid-turn at 10, then its own title;
      // grandchild: forked inside the child's own events. No input is left pending
      // at either cut, so no agent writes to them while they are read.
      let parent: string;
      let child: string;
      let grandchild: string;
      let expected: { parent: LogSpecEvent[]; child: LogSpecEvent[]; grandchild: LogSpecEvent[] };
      beforeAll(async () => {
        parent = await impl.createSession();
        await impl.append(parent, REFERENCE_LOG);
        child = await impl.fork(parent, 10);
        await impl.append(child, [{ type: 'session/title', data: { title: 'child' } }]);
        const childLog = await wholeLog(impl, child);
        grandchild = await impl.fork(child, childLog.length - 1);
        expected = { parent: await wholeLog(impl, parent), child: childLog, grandchild: await wholeLog(impl, grandchild) };
      });

      it('give each descendant its ancestors’ events through the cut, marked inherited, then its own', () => {
        const { parent: p, child: c, grandchild: g } = expected;
        expect(c.slice(0, 11).map((e) => ({ ...strip(e), inherited: false }))).toEqual(p.slice(0, 11).map(strip));
        expect(c.slice(0, 11).every((e) => e.inherited)).toBe(true);
        expect(c.slice(11).some((e) => e.inherited)).toBe(false);
        expect(c[11]).toMatchObject({ type: 'session/end-seed', data: { parentSessionId: parent, cutSeq: 10 } });
        // The grandchild inherits the child's whole log, the child's own marker and closers included.
        expect(g.slice(0, c.length).map((e) => ({ ...strip(e), inherited: false }))).toEqual(c.map((e) => ({ ...strip(e), inherited: false })));
        expect(g.slice(0, c.length).every((e) => e.inherited)).toBe(true);
        expect(g[c.length]).toMatchObject({ type: 'session/end-seed', data: { parentSessionId: child, cutSeq: c.length - 1 } });
      });

      for (const size of [1, 7, 50]) {
        it(`page in pages of ${size} from any seq to exactly the whole log's slice`, async () => {
          for (const [id, log] of [
            [parent, expected.parent],
            [child, expected.child],
            [grandchild, expected.grandchild],
          ] as const) {
            for (let after = -1; after < log.length; after += 3) {
              expect((await impl.page(id, after, size)).map(strip), `after ${after}`).toEqual(log.slice(after + 1, after + 1 + size).map(strip));
            }
          }
        });
      }

      it('keep the parent as it was: a fork never changes its parent', async () => {
        expect((await wholeLog(impl, parent)).map(strip)).toEqual(expected.parent.map(strip));
        expect(expected.parent.map(({ type, data }) => ({ type, data }))).toEqual(REFERENCE_LOG);
      });
    });

    describe('deletion', () => {
      it('refuses a session whose events a descendant shares, and deletes nothing', async () => {
        const root = await impl.createSession();
        await impl.append(root, REFERENCE_LOG.slice(0, 2));
        const kid = await impl.fork(root, 1);
        expect(await impl.deleteSession(root)).toMatchObject({ code: 'SESSION_HAS_CHILDREN' });
        expect(await impl.counters(root)).not.toBeNull();
        expect(await impl.counters(kid)).not.toBeNull();
      });

      it('deletes a leaf, leaving its ancestors and their reads unchanged', async () => {
        const root = await impl.createSession();
        await impl.append(root, REFERENCE_LOG.slice(0, 2));
        const before = await wholeLog(impl, root);
        const kid = await impl.fork(root, 1);
        expect(await impl.deleteSession(kid)).toEqual([kid]);
        expect(await impl.counters(kid)).toBeNull();
        expect((await wholeLog(impl, root)).map(strip)).toEqual(before.map(strip));
      });

      it('deletes a session with its descendants when asked, session first', async () => {
        const root = await impl.createSession();
        await impl.append(root, REFERENCE_LOG.slice(0, 2));
        const kid = await impl.fork(root, 1);
        const grandkid = await impl.fork(kid, 2);
        const deleted = await impl.deleteSession(root, true);
        expect(Array.isArray(deleted) && deleted[0]).toBe(root);
        expect([...(deleted as string[])].sort()).toEqual([root, kid, grandkid].sort());
        for (const id of [root, kid, grandkid]) expect(await impl.counters(id)).toBeNull();
      });

      it('answers SESSION_NOT_FOUND for a session that is not there', async () => {
        const id = await impl.createSession();
        expect(await impl.deleteSession(id)).toEqual([id]);
        expect(await impl.deleteSession(id)).toMatchObject({ code: 'SESSION_NOT_FOUND' });
      });
    });
  });
}
