// A turn crash repair closed lasts until the crash, not until its recovery
// (src/store/crash-stop-times.ts): a crashed recording imported days after it
// was written gets its `interrupted` closers at import time, yet its turn's
// and step's durations, and the session's time in turns, end at the last
// event the stopped process wrote.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { readFixture } from '../fixtures/recordings/recordings.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

const TURN = 'turn reason durationMs steps { step reason durationMs }';

describe('durations of a turn a crash interrupted', () => {
  it('end at the last event before the repair closers, in turnAt, turns, lastTurn and totals', async () => {
    // Turn 1: 10:00:04 → 10:00:08. Turn 2 starts 10:00:11, its step 10:00:12; the last event written is at 10:00:15.
    const { importRecording } = await app.ok('mutation($r: String!) { importRecording(recording: $r) { id eventCount } }', {
      r: readFixture('v3-crashed.jsonl'),
    });
    const id = importRecording.id as string;
    const { session } = await app.ok(
      `query($id: ID!, $seq: Int!) { session(id: $id) {
        events(first: 100) { edges { node { seq type synthetic createdAt } } }
        turnAt(seq: $seq) { ${TURN} } lastTurn { ${TURN} } turns { turn durationMs } totals { turnMs }
      } }`,
      { id, seq: importRecording.eventCount - 1 },
    );
    // The closers were written now, not at 10:00:15.
    const events = session.events.edges.map((e: { node: unknown }) => e.node);
    const closer = events.at(-1);
    expect(closer).toMatchObject({ type: 'turn/end', synthetic: true });
    expect(Date.parse(closer.createdAt) - Date.parse('2026-11-30T10:00:15.000Z')).toBeGreaterThan(60_000);

    const crashed = { turn: 2, reason: 'interrupted', durationMs: 4_000, steps: [{ step: 1, reason: 'interrupted', durationMs: 3_000 }] };
    expect(session.turnAt).toEqual(crashed);
    expect(session.lastTurn).toEqual(crashed);
    expect(session.turns).toEqual([
      { turn: 1, durationMs: 4_000 },
      { turn: 2, durationMs: 4_000 },
    ]);
    expect(session.totals.turnMs).toBe(8_000);
  });
});
