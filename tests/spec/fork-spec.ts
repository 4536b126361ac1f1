// The fork contract (docs/contract.md#exact-fork, docs/contract.md#branch) as one suite that each
// implementation runs through a small initializer, in the style of langgraphjs'
// checkpoint validation: the pure core, the SessionStore and the GraphQL API
// all answer the same rows (tests/spec/reference-log.ts) and the same checks.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { NewEvent } from '../../src/core/events.ts';
import { LogState } from '../../src/core/log-state.ts';
import { RecordingValidator, recordingHeader, recordingLine } from '../../src/core/recording.ts';
import { BRANCH_ROWS, closerName, COMPACTION_LOG, COMPACTION_ROWS, EXPECTED_CLOSERS, NO_TURN_END_LOG, REFERENCE_LOG } from './reference-log.ts';
import { SessionFold } from '../../src/agent/session-fold.ts';

/** One event as the implementation exposes it. */
export interface SpecEvent {
  seq: number;
  type: string;
  data: unknown;
  synthetic?: boolean;
  inherited?: boolean;
  /** Compared between parent and child when exposed: a shared prefix is the parent's rows, not copies. */
  createdAt?: unknown;
}

export interface ParentRef {
  id: string;
  /** The parent's log as the implementation exposes it. */
  events: SpecEvent[];
}

/** An exact cut (docs/contract.md#exact-fork), or a turn-level branch (docs/contract.md#branch). */
export type ForkCut = { atSeq: number } | { anchorSeq?: number | null };

export interface ForkedChild {
  /** The child's id (nested forks fork it again). */
  id?: string;
  /**
   * The child's whole log, read when the implementation is done with it (a
   * child's agent may have answered input queued in its prefix): `counters`
   * must describe this same log.
   */
  events: SpecEvent[];
  cutSeq: number;
  /** What the implementation reports; an omitted field is one it does not report. */
  counters: {
    inheritedEventCount: number;
    firstLiveSeq: number;
    forkedAtSeq?: number | null;
    eventCount?: number;
    turnCount?: number;
    pendingInputCount?: number;
    status?: string;
  };
  /** The fork's synthetic events as handed back with the fork, if they are. */
  syntheticEvents?: SpecEvent[];
}

export interface ForkSpecInitializer<P extends ParentRef = ParentRef> {
  setup?(): Promise<void>;
  teardown?(): Promise<void>;
  createParent(events: NewEvent[]): Promise<P>;
  fork(parent: P, cut: ForkCut): Promise<ForkedChild>;
}

const strip = ({ seq, type, data, synthetic, createdAt }: SpecEvent) => ({ seq, type, data, synthetic: !!synthetic, createdAt });

/** Every check a child must pass, whatever produced it. */
function checkChild(parent: ParentRef, child: ForkedChild, cut: number, closers: string[]) {
  const log = child.events;
  expect(child.cutSeq).toBe(cut);
  expect(log.map((e) => e.seq)).toEqual(log.map((_, i) => i));

  // The parent's events 0..cut, marked inherited.
  const prefix = log.slice(0, cut + 1);
  expect(prefix.map(strip)).toEqual(parent.events.slice(0, cut + 1).map(strip));
  expect(
    prefix.filter((e) => !e.inherited).map((e) => e.seq),
    'not marked inherited',
  ).toEqual([]);

  // Then the child's own marker, then exactly the closers: synthetic, not inherited.
  const marker = log[cut + 1];
  expect({ type: marker.type, data: marker.data, inherited: !!marker.inherited, synthetic: !!marker.synthetic }).toEqual({
    type: 'session/end-seed',
    data: { parentSessionId: parent.id, cutSeq: cut, inheritedEventCount: cut + 1 },
    inherited: false,
    synthetic: false,
  });
  const firstLiveSeq = cut + 2 + closers.length;
  const own = log.slice(cut + 2, firstLiveSeq);
  expect(own.map(closerName)).toEqual(closers);
  expect(
    own.filter((e) => !e.synthetic || e.inherited).map((e) => e.seq),
    'closers not synthetic, or inherited',
  ).toEqual([]);
  if (child.syntheticEvents) expect(child.syntheticEvents.map(strip)).toEqual(own.map(strip));
  // Whatever follows the seed is the child's own agent at work.
  expect(
    log
      .slice(firstLiveSeq)
      .filter((e) => e.inherited || e.synthetic)
      .map((e) => e.seq),
    'live events inherited or synthetic',
  ).toEqual([]);

  // The whole log keeps the relationship rules (the one reducer's strict side)…
  const state = new LogState();
  for (const e of log) {
    expect(state.violation(e), `seq ${e.seq} ${e.type}`).toBeUndefined();
    state.apply(e);
  }
  // …and is a valid V4 recording (codec, marker placement, inherited prefix) whose seed ends where ours does.
  const recording = new RecordingValidator();
  recording.push(JSON.stringify(recordingHeader({ id: 'child' })));
  for (const { seq, type, data, inherited, synthetic } of log) recording.push(recordingLine({ seq, type, data, inherited, synthetic }));
  expect(recording.finish().fork).toEqual({ forkedAtSeq: cut, inheritedEventCount: cut + 1, firstLiveSeq });

  // The counters reported are the reducer's over the same log.
  const folded = {
    inheritedEventCount: cut + 1,
    firstLiveSeq,
    forkedAtSeq: cut,
    eventCount: state.nextSeq,
    turnCount: state.turnCount,
    pendingInputCount: state.pendingInputCount,
    status: state.openTurn === undefined ? 'IDLE' : 'RUNNING',
  };
  for (const [k, v] of Object.entries(folded)) {
    const got = child.counters[k as keyof typeof folded];
    if (got !== undefined) expect(got, k).toBe(v);
  }
}

export function forkSpec<P extends ParentRef>(name: string, impl: ForkSpecInitializer<P>) {
  describe(`fork spec: ${name}`, () => {
    const logs = { reference: REFERENCE_LOG, 'no turn/end': NO_TURN_END_LOG, compaction: COMPACTION_LOG };
    const parents = {} as Record<keyof typeof logs, P>;
    beforeAll(async () => {
      await impl.setup?.();
      for (const key of Object.keys(logs) as Array<keyof typeof logs>) parents[key] = await impl.createParent(logs[key]);
    });
    afterAll(async () => impl.teardown?.());

    it('each parent holds exactly the events it was given', () => {
      for (const key of Object.keys(logs) as Array<keyof typeof logs>) {
        expect(parents[key].events.map(({ seq, type, data, synthetic }) => ({ seq, type, data, synthetic: !!synthetic }))).toEqual(
          logs[key].map(({ type, data }, seq) => ({ seq, type, data, synthetic: false })),
        );
      }
    });

    EXPECTED_CLOSERS.forEach((closers, cut) => {
      it(`exact cut at ${cut}: prefix, marker, then ${JSON.stringify(closers)}`, async () => {
        checkChild(parents.reference, await impl.fork(parents.reference, { atSeq: cut }), cut, closers);
      });
    });

    // Forks and compaction: the child's log keeps the rules, and its agent's next request is checked.
    for (const row of COMPACTION_ROWS) {
      it(`compaction: ${row.name}`, async () => {
        let parent: ParentRef = parents.compaction;
        let child = await impl.fork(parents.compaction as P, row.cut);
        if (row.nested) {
          // Fork the child again at its end (its own marker and closers inherited).
          checkChild(parent, child, row.cutSeq, []);
          parent = { id: child.id!, events: child.events };
          child = await impl.fork(parent as P, { atSeq: child.events.length - 1 });
          checkChild(parent, child, parent.events.length - 1, []);
        } else {
          checkChild(parent, child, row.cutSeq, []);
        }
        // The agent's conversation after the fork: what its model is sent next, before the child's own input.
        const fold = new SessionFold('child');
        fold.apply(child.events.map((e) => ({ seq: e.seq, type: e.type, data: e.data, inherited: e.inherited, synthetic: e.synthetic })));
        expect(fold.conversation.messages()).toEqual(row.request);
        // Plugin brackets are never closed by a fork: no compaction end was made up.
        const own = child.events.filter((e) => !e.inherited);
        expect(own.filter((e) => e.type.startsWith('plugin/')).map((e) => e.type)).toEqual([]);
      });
    }

    for (const row of BRANCH_ROWS) {
      it(`branch of the ${row.log} log, anchor ${row.anchorSeq}: cut ${row.cutSeq}, then ${JSON.stringify(row.closers)}`, async () => {
        const cut = row.anchorSeq === undefined ? {} : { anchorSeq: row.anchorSeq };
        checkChild(parents[row.log], await impl.fork(parents[row.log], cut), row.cutSeq, row.closers);
      });
    }
  });
}
