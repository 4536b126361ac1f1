// A turn of thousands of steps (a recording can hold 200,000 events in one
// turn; a runner's batches too): Turn.steps lists its first steps only (it
// reads at most 10,000 of the turn's events), and said nothing of it, so the
// dashboard's turn end read "3333 steps · 3333 tool calls" for a turn of
// 49,998. Turn.stepCount and toolCallCount count them all in the database,
// and stepsTruncated says when steps (and usage) are partial. steps(first:) lists the
// first steps only, reading those steps' events, not the turn's 10,000 (the dashboard's
// turn end draws 50 bars: it read 3,333 steps for them).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { statementRecorder } from '../helpers/explain.ts';
import { longTurnRecording } from '../fixtures/recordings/recordings.ts';

/** Past the 3,333 steps Turn.steps lists, and small enough to import in a few seconds. */
const STEPS = 3_500;

let app: TestApp;
const statements = statementRecorder(/"Event"/);
beforeAll(async () => {
  app = await startTestApp({ onQuery: statements.onQuery });
});
afterAll(() => app.close());

const TURN = `query($id: ID!, $seq: Int!) { session(id: $id) { turnAt(seq: $seq) { turn stepCount toolCallCount stepsTruncated steps { step } } } }`;

describe('Turn.stepCount, toolCallCount, stepsTruncated', () => {
  it('count every step and call of a turn of thousands of steps, and say when steps lists only the first', async () => {
    const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson' },
      body: longTurnRecording(STEPS),
    });
    expect(res.status).toBe(201);
    const { session } = (await res.json()) as { session: { id: string; eventCount: number } };

    const long = (await app.ok(TURN, { id: session.id, seq: 2 })).session.turnAt;
    expect(long).toMatchObject({ turn: 1, stepCount: STEPS, toolCallCount: STEPS, stepsTruncated: true });
    expect(long.steps.length).toBeLessThan(STEPS);
    expect(long.steps.map((s: { step: number }) => s.step)).toEqual(Array.from({ length: long.steps.length }, (_, i) => i + 1));

    const short = (await app.ok(TURN, { id: session.id, seq: session.eventCount - 1 })).session.turnAt;
    expect(short).toEqual({ turn: 2, stepCount: 1, toolCallCount: 0, stepsTruncated: false, steps: [{ step: 1 }] });
  }, 60_000);

  it('count a fork’s inherited part of a turn too (the counts read each lineage segment)', async () => {
    const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson' },
      body: longTurnRecording(10, 'short parent'),
    });
    const { session } = (await res.json()) as { session: { id: string } };
    // Cut at step 4's call (step k's model/message is seq 4k): the child's turn 1 is inherited, then closed by the fork.
    const { forkSession } = await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id, atSeq: 16 }) { session { id } } }`, { id: session.id });
    const child = (await app.ok(TURN, { id: forkSession.session.id, seq: 2 })).session.turnAt;
    expect(child).toMatchObject({ turn: 1, stepCount: 4, toolCallCount: 4, stepsTruncated: false });
    expect(child.steps).toHaveLength(4);
  }, 60_000);

  it('steps(first:) lists the first steps as steps does, reading their events only; first is 1–3,333', async () => {
    const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson' },
      body: longTurnRecording(STEPS, 'first steps'),
    });
    const { session } = (await res.json()) as { session: { id: string } };
    const STEP = 'step reason durationMs toolCallCount usage { inputTokens outputTokens costUsd }';
    const query = (args: string) => `query($id: ID!) { session(id: $id) { turnAt(seq: 2) { stepCount steps${args} { ${STEP} } } } }`;
    /** The answer, and the rows of "Event" its statements returned. */
    const read = async (args: string) => {
      let data: any;
      const ran = await statements.during(async () => (data = await app.ok(query(args), { id: session.id })));
      return { turn: data.session.turnAt, rows: ran.reduce((n, s) => n + s.rows, 0) };
    };
    const all = await read('');
    const first = await read('(first: 50)');
    expect(first.turn.stepCount).toBe(STEPS);
    expect(first.turn.steps).toEqual(all.turn.steps.slice(0, 50));
    // The whole list read 10,000 events; the first 50 steps read the 51 step starts and those steps' events (and the count).
    expect(all.rows).toBeGreaterThan(9_000);
    expect(first.rows).toBeLessThan(300);
    const many = await app.gql('query($id: ID!) { session(id: $id) { turnAt(seq: 2) { steps(first: 3334) { step } } } }', { id: session.id });
    expect(many.errors?.[0].message).toMatch(/first must be 1–3333/);
    const zero = await app.gql(query('(first: 0)'), { id: session.id });
    expect(zero.errors?.[0].message).toMatch(/first must be 1–3333/);
    // A turn of fewer steps than asked for lists them all.
    const whole = (await app.ok(`query($id: ID!) { session(id: $id) { turnAt(seq: ${2 + 4 * STEPS + 6}) { steps(first: 50) { step } } } }`, { id: session.id }))
      .session.turnAt;
    expect(whole.steps).toEqual([{ step: 1 }]);
  }, 60_000);
});
