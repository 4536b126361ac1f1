// The dashboard's pure view models: the conversation fold and the lineage forest.
import { describe, expect, it } from 'vitest';
import { foldConversation, itemsAfter } from '../../client/dashboard/src/conversation.ts';
import { takenUnstartedAt } from '../../src/core/taken-inputs.ts';
import { distinctTitle, lineageForest } from '../../client/dashboard/src/lineage.ts';
import type { SessionSummaryFragment } from '../../client/generated/graphql.ts';
import { dashboardEvent as ev } from '../helpers/dashboard-events.ts';

describe('foldConversation', () => {
  // A child forked at the tool call (seq 4): marker, then the fork closers.
  const child = [
    ev(0, 'inbox/add', { inputId: 'in_1', text: 'time?' }, { inherited: true }),
    ev(1, 'inbox/remove', { inputId: 'in_1', reason: 'taken' }, { inherited: true }),
    ev(2, 'turn/start', { turn: 1, inputId: 'in_1' }, { inherited: true }),
    ev(3, 'step/start', { turn: 1, step: 1 }, { inherited: true }),
    ev(4, 'model/message', { turn: 1, step: 1, text: 'Checking.', toolCalls: [{ id: 'c1', name: 'clock', arguments: '{}' }] }, { inherited: true }),
    ev(5, 'session/end-seed', { parentSessionId: 'ses_p', cutSeq: 4, inheritedEventCount: 5 }),
    ev(6, 'tool/result', { turn: 1, step: 1, callId: 'c1', resultId: 'r', status: 'not-started', content: 'forked wording' }, { synthetic: true }),
    ev(7, 'step/end', { turn: 1, step: 1, reason: 'forked' }, { synthetic: true }),
    ev(8, 'turn/end', { turn: 1, reason: 'forked' }, { synthetic: true }),
    ev(9, 'inbox/add', { inputId: 'in_2', text: 'queued one' }),
  ];

  it('pairs tool calls with their results and keeps repair visible; a fork closer comes after its marker', () => {
    const items = foldConversation(child);
    expect(items.map((i) => i.kind)).toEqual(['user', 'assistant', 'fork-marker', 'closer-result', 'step-end', 'turn-end', 'user']);
    const assistant = items[1] as Extract<(typeof items)[number], { kind: 'assistant' }>;
    expect(assistant.toolCalls[0].result).toMatchObject({ status: 'not-started', synthetic: true, content: 'forked wording', seq: 6, afterMarker: true });
    expect(assistant.seqs).toEqual([4]);
    expect(items[3]).toMatchObject({ kind: 'closer-result', seqs: [6], call: { id: 'c1' } });
    expect(items[0]).toMatchObject({ state: 'taken', inherited: true });
    expect(items[6]).toMatchObject({ state: 'queued', text: 'queued one' });
    expect(items[5]).toMatchObject({ kind: 'turn-end', reason: 'forked', synthetic: true, endSeq: 8 });
  });

  // A child forked at the inbox/remove (seq 2): the input was taken, its turn never started, nothing is closed.
  const cutBeforeTurn = [
    ev(0, 'inbox/add', { inputId: 'in_0', text: 'first' }, { inherited: true }),
    ev(1, 'inbox/add', { inputId: 'in_1', text: 'what time\nis it?' }, { inherited: true }),
    ev(2, 'inbox/remove', { inputId: 'in_1', reason: 'taken' }, { inherited: true }),
    ev(3, 'session/end-seed', { parentSessionId: 'ses_p', cutSeq: 2, inheritedEventCount: 3 }),
    ev(4, 'inbox/add', { inputId: 'in_2', text: 'and now?' }),
    ev(5, 'inbox/remove', { inputId: 'in_2', reason: 'taken' }),
    ev(6, 'turn/start', { turn: 1, inputId: 'in_2' }),
  ];

  it('says at the fork marker which input the cut left taken but unstarted (nothing answers it in the child)', () => {
    const items = foldConversation(cutBeforeTurn);
    const marker = items.find((i) => i.kind === 'fork-marker');
    expect(marker).toMatchObject({ takenUnstarted: [{ seq: 1, inputId: 'in_1', text: 'what time\nis it?' }] });
    // A marker with nothing taken says nothing (the child's own input, taken after the marker, is not named).
    expect(foldConversation(child).find((i) => i.kind === 'fork-marker')).not.toHaveProperty('takenUnstarted');
    // The fork dialog's check from the events before the cut: at the removal, not at the add or once its turn started.
    const get = (seq: number) => cutBeforeTurn[seq];
    expect(takenUnstartedAt(get, 2)).toEqual([{ seq: 1, inputId: 'in_1', text: 'what time\nis it?' }]);
    expect(takenUnstartedAt(get, 1)).toEqual([]);
    expect(takenUnstartedAt(get, 6)).toEqual([]);
    expect(takenUnstartedAt((seq) => child[seq], 4)).toEqual([]);
  });

  it("shows a failed turn's reason (plugin/agent/error)", () => {
    const items = foldConversation([
      ev(0, 'turn/start', { turn: 1, inputId: 'in_1' }),
      ev(1, 'step/start', { turn: 1, step: 1 }),
      ev(2, 'plugin/agent/error', { turn: 1, step: 1, message: 'scripted failure: why' }),
      ev(3, 'step/end', { turn: 1, step: 1, reason: 'failed' }),
      ev(4, 'turn/end', { turn: 1, reason: 'failed' }),
    ]);
    expect(items[0]).toMatchObject({ kind: 'agent-error', turn: 1, step: 1, message: 'scripted failure: why' });
  });

  it('folds a window of the log from its first turn start, or from inside a turn, without false rule breaks', () => {
    const turn = (n: number, at: number) => [
      ev(at, 'inbox/add', { inputId: `in_${n}`, text: `q${n}` }),
      ev(at + 1, 'inbox/remove', { inputId: `in_${n}`, reason: 'taken' }),
      ev(at + 2, 'turn/start', { turn: n, inputId: `in_${n}` }),
      ev(at + 3, 'step/start', { turn: n, step: 1 }),
      ev(at + 4, 'model/message', { turn: n, step: 1, text: '', toolCalls: [{ id: `c${n}`, name: 'clock', arguments: '{}' }] }),
      ev(at + 5, 'tool/result', { turn: n, step: 1, callId: `c${n}`, resultId: `r${n}`, status: 'ok', content: 'noon' }),
      ev(at + 6, 'step/end', { turn: n, step: 1, reason: 'completed' }),
      ev(at + 7, 'turn/end', { turn: n, reason: 'completed' }),
    ];
    const log = [...turn(1, 0), ...turn(2, 8), ...turn(3, 16)];
    // From turn 2's inbox/remove (its add is before the window): no note, turns numbered on.
    const window = foldConversation(log.slice(9), { partial: true });
    expect(window.filter((i) => i.kind === 'note')).toEqual([]);
    expect(window.map((i) => i.kind)).toEqual(['assistant', 'turn-end', 'user', 'assistant', 'turn-end']);
    // From inside turn 3's step: the result's call is before the window.
    const midStep = foldConversation(log.slice(21), { partial: true });
    expect(midStep.map((i) => i.kind)).toEqual(['note', 'turn-end']);
    expect(midStep[0]).toMatchObject({ text: expect.stringContaining('its call is before the loaded events') });
    // A call whose result lies beyond a window that stops before the log's end is not "running".
    const cut = foldConversation(log.slice(16, 21), { partial: true, endsBeforeLog: true });
    const call = cut.flatMap((i) => (i.kind === 'assistant' ? i.toolCalls : []))[0];
    expect(call.waiting).toBe('not-loaded');
  });

  it('tells a call still running from one whose step ended without a result, and shows events that break the rules (the server reducer)', () => {
    const call = (id: string) => ({ id, name: 'clock', arguments: '{}' });
    const items = foldConversation([
      ev(0, 'turn/start', { turn: 1, inputId: 'in_1' }),
      ev(1, 'step/start', { turn: 1, step: 1 }),
      ev(2, 'model/message', { turn: 1, step: 1, text: '', toolCalls: [call('c1')] }),
      ev(3, 'step/end', { turn: 1, step: 1, reason: 'failed' }),
      ev(4, 'step/start', { turn: 1, step: 2 }),
      ev(5, 'model/message', { turn: 1, step: 2, text: '', toolCalls: [call('c2'), call('c3')] }),
      ev(6, 'tool/result', { turn: 1, step: 2, callId: 'c3', resultId: 'r3', status: 'ok', content: 'noon' }),
      ev(7, 'tool/result', { turn: 1, step: 2, callId: 'c9', resultId: 'r9', status: 'ok', content: '?' }),
    ]);
    const calls = items.flatMap((i) => (i.kind === 'assistant' ? i.toolCalls : []));
    expect(calls.map((c) => [c.id, c.waiting ?? c.result?.status])).toEqual([
      ['c1', 'unanswered'],
      ['c2', 'running'],
      ['c3', 'ok'],
    ]);
    expect(items.at(-1)).toMatchObject({ kind: 'note', seqs: [7], text: expect.stringMatching(/result pairing.*c9/) });
  });

  it('names plugin events in words, as the timeline does (the raw type on hover)', () => {
    const items = foldConversation([ev(0, 'plugin/compaction/start', { toSeq: 0 }), ev(1, 'plugin/workspace/write', { key: 'k', value: 'v', callId: 'c' })]);
    expect(items.map((i) => (i.kind === 'note' ? [i.text, i.type] : i.kind))).toEqual([
      ['compaction started', 'plugin/compaction/start'],
      ['workspace write', 'plugin/workspace/write'],
    ]);
  });

  it('keeps the items touched after a cut (a call whose result came later included)', () => {
    expect(itemsAfter(foldConversation(child), 4).map((i) => i.seqs[0])).toEqual([5, 6, 7, 8, 9]);
  });
});

describe('lineageForest', () => {
  const s = (id: string, title: string, createdAt: string, parent?: string): SessionSummaryFragment => ({
    id,
    title,
    status: 'IDLE',
    model: null,
    lastTurnFailed: false,
    formatVersion: 4,
    createdAt,
    updatedAt: createdAt,
    eventCount: 1,
    turnCount: 0,
    forkedAtSeq: parent ? 0 : null,
    inheritedEventCount: 0,
    firstLiveSeq: 0,
    runner: null,
    runnerHolder: null,
    parent: parent ? { id: parent, title: null } : null,
  });
  const sessions = [
    s('a', 'Alpha', '2026-01-01'),
    s('b', 'Beta', '2026-01-02'),
    s('a2', 'Alpha fork two', '2026-01-04', 'a'),
    s('a1', 'Alpha fork one', '2026-01-03', 'a'),
    s('a1x', 'Deep needle', '2026-01-05', 'a1'),
    s('orphan', 'Orphan', '2026-01-06', 'gone'),
  ];

  it('nests children under parents: roots newest first, children in fork order', () => {
    const forest = lineageForest(sessions);
    expect(forest.map((n) => n.session.id)).toEqual(['orphan', 'b', 'a']);
    expect(forest[2].children.map((n) => n.session.id)).toEqual(['a1', 'a2']);
    expect(forest[2].children[0].children.map((n) => n.session.id)).toEqual(['a1x']);
  });

  it('search keeps matches and the ancestors leading to them', () => {
    const forest = lineageForest(sessions, 'NEEDLE');
    expect(forest.map((n) => [n.session.id, n.matched])).toEqual([['a', false]]);
    expect(forest[0].children.map((n) => [n.session.id, n.matched])).toEqual([['a1', false]]);
    expect(forest[0].children[0].children.map((n) => [n.session.id, n.matched])).toEqual([['a1x', true]]);
  });
});

describe('distinctTitle', () => {
  it("drops the parent's title and the separator after it; keeps a title that does not start with it", () => {
    expect(distinctTitle('Plan · variant 3', 'Plan', 4)).toBe('variant 3');
    expect(distinctTitle('Plan: try the cheap model', 'Plan', 4)).toBe('try the cheap model');
    expect(distinctTitle('Another idea', 'Plan', 4)).toBe('Another idea');
    expect(distinctTitle('Plan', 'Plan', 4)).toBe('fork @4');
    expect(distinctTitle('Plan', null, 4)).toBe('Plan');
  });
});
