import { describe, expect, it } from 'vitest';
import { buildForkSeed } from '../../src/core/fork-seed.ts';
import { closeOpenTail, syntheticResultId, type RepairCause } from '../../src/core/repair.ts';
import { selectBranchCut, turnEndsOf, turnEndsOfLog } from '../../src/core/cut.ts';
import { decodeEvent, type LogEvent } from '../../src/core/events.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { closerName, EXPECTED_CLOSERS, openAtCut, openTailOf, REFERENCE_LOG, withSeqs } from '../spec/reference-log.ts';
import { forkSpec } from '../spec/fork-spec.ts';
import { anyData } from '../helpers/event-data.ts';

const log = withSeqs(REFERENCE_LOG);
const PARENT = 'ses_parent';

function fork(events: LogEvent[], cut: number, parent = PARENT) {
  const seed = buildForkSeed({ parentSessionId: parent, cutSeq: cut, openTail: openAtCut(events, cut), effectOf: toolEffectOf });
  const child: LogEvent[] = [...events.slice(0, cut + 1).map((e) => ({ ...e, inherited: true })), ...seed.events];
  return { seed, child };
}

// The contract rows (exact cuts and branches), as the store and the GraphQL API run them.
forkSpec('pure core', {
  createParent: async (events) => ({ id: PARENT, events: withSeqs(events) }),
  async fork(parent, cut) {
    const cutSeq = 'atSeq' in cut ? cut.atSeq : await selectBranchCut(turnEndsOfLog(parent.events), cut.anchorSeq);
    const { seed, child } = fork(parent.events, cutSeq, parent.id);
    return { id: `${parent.id}_child`, events: child, cutSeq, counters: seed };
  },
});

describe('fork seeds on the reference log (pure core)', () => {
  it('the reference log is valid V4 and the table covers every seq', () => {
    for (const e of REFERENCE_LOG) decodeEvent(e.type, e.data);
    expect(EXPECTED_CLOSERS.length).toBe(REFERENCE_LOG.length);
  });

  it('the open tail is enough: the whole prefix gives the same closers', () => {
    for (let cut = 0; cut < log.length; cut++) {
      const cause: RepairCause = { kind: 'forked', parentSessionId: PARENT, cutSeq: cut };
      const closers = fork(log, cut)
        .seed.events.slice(1)
        .map(({ seq: _s, ...e }) => e);
      expect(closeOpenTail(log.slice(0, cut + 1), cause, toolEffectOf), `cut ${cut}`).toEqual(closers);
    }
  });

  it('fork closers say not-started / forked with fork wording and retry advice by effect', () => {
    const { seed } = fork(log, 10);
    const results = seed.events.filter((e) => e.type === 'tool/result').map((e) => e.data as any);
    expect(results.map((r) => r.status)).toEqual(['not-started', 'not-started', 'not-started']);
    for (const r of results) {
      expect(r.content).toContain(`forked at event 10 of session ${PARENT}`);
      expect(r.content).toContain('The parent session may have executed the call after the cut');
    }
    expect(results[0].content).toMatch(/"note_read" is idempotent, so it is safe to call it again/);
    expect(results[1].content).toMatch(/"note_write" has side effects: .*check its effect before repeating it/);
    expect(results[2].content).toMatch(/"mystery" is not a known tool.*check its effect before repeating it/);
    expect(seed.events.filter((e) => e.type !== 'tool/result' && e.type !== 'session/end-seed').map((e) => (e.data as any).reason)).toEqual([
      'forked',
      'forked',
    ]);
  });

  it('crash repair has the same structure with interrupted statuses, reasons and wording', () => {
    for (let cut = 0; cut < log.length; cut++) {
      const crashed = closeOpenTail(openTailOf(log, cut), { kind: 'interrupted', sessionId: 'ses_crashed' }, toolEffectOf);
      const forked = closeOpenTail(openTailOf(log, cut), { kind: 'forked', parentSessionId: PARENT, cutSeq: cut }, toolEffectOf);
      expect(crashed.map(closerName)).toEqual(forked.map(closerName));
      for (const c of crashed) {
        const d = c.data as any;
        if (c.type === 'tool/result') {
          expect(d.status).toBe('interrupted');
          expect(d.content).toContain('the session stopped while the call was in flight, so its effect is unknown');
          expect(d.content).not.toContain('forked');
        } else expect(d.reason).toBe('interrupted');
      }
    }
    const c1 = closeOpenTail(openTailOf(log, 6), { kind: 'interrupted', sessionId: 'ses_crashed' }, toolEffectOf)[0].data as any;
    expect(c1.content).toMatch(/"clock" is read-only, so it is safe to call it again/);
  });

  it('synthetic result ids are deterministic across runs and distinct across calls and causes', () => {
    const cause: RepairCause = { kind: 'forked', parentSessionId: PARENT, cutSeq: 10 };
    const ids = (c: RepairCause) =>
      closeOpenTail(openTailOf(log, 10), c, toolEffectOf)
        .filter((e) => e.type === 'tool/result')
        .map((e) => (e.data as any).resultId);
    expect(ids(cause)).toEqual(ids({ ...cause }));
    expect(new Set(ids(cause)).size).toBe(3);
    const crash = ids({ kind: 'interrupted', sessionId: PARENT });
    expect(crash.some((id) => ids(cause).includes(id))).toBe(false);
    expect(ids(cause)[0]).toBe(syntheticResultId(cause, 'c3'));
  });

  it('an empty history gets only the marker', () => {
    const seed = buildForkSeed({ parentSessionId: PARENT, cutSeq: -1, openTail: undefined, effectOf: toolEffectOf });
    expect(seed).toEqual({
      events: [{ seq: 0, type: 'session/end-seed', data: { parentSessionId: PARENT, cutSeq: -1, inheritedEventCount: 0 } }],
      inheritedEventCount: 0,
      firstLiveSeq: 1,
    });
    expect(closeOpenTail([], { kind: 'interrupted', sessionId: 's' }, toolEffectOf)).toEqual([]);
  });

  it('nested forks keep ancestor markers in the prefix; the own marker is the last marker', () => {
    const first = fork(log, 10).child; // prefix 0..10, marker at 11, closers 12..16
    expect(first[11].type).toBe('session/end-seed');
    // Cut the child exactly at its inherited marker: the open tail is still turn 1, step 2.
    const { child, seed } = fork(first, 11, 'ses_child');
    const markers = child.filter((e) => e.type === 'session/end-seed');
    expect(markers.map((m) => anyData(m).parentSessionId)).toEqual([PARENT, 'ses_child']);
    expect(child[child.length - seed.events.length].type).toBe('session/end-seed');
    expect(seed.events.slice(1).map(closerName)).toEqual(['r:c3', 'r:c4', 'r:c5', 'step:1/2', 'turn:1']);
    // Cut the child after its own closers: nothing is open any more.
    const closed = fork(first, first.length - 1, 'ses_child');
    expect(closed.seed.events.map((e) => e.type)).toEqual(['session/end-seed']);
  });
});

describe('selectBranchCut (docs/contract.md#branch)', () => {
  const turnEnds = [20, 31];
  it.each([
    [undefined, 31],
    [0, 20],
    [4, 20],
    [20, 20],
    [21, 31],
    [31, 31],
    [500, 31],
  ])('anchor %s → %s', async (anchor, expected) => {
    expect(await selectBranchCut(turnEndsOf(turnEnds), anchor)).toBe(expected);
  });
  it('no turn/end: marker only (-1)', async () => {
    expect(await selectBranchCut(turnEndsOf([]), 3)).toBe(-1);
    expect(await selectBranchCut(turnEndsOf([]))).toBe(-1);
  });
});
