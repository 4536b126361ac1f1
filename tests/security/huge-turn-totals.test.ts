// A turn's totals are what its user bills from, so they are exact however long
// the turn: Turn.usage, stepCount and toolCallCount of a turn of 200,000 events
// (an imported recording's; a runner's batches make as many) are summed over
// all its answers in the database, one row out, never its events read into the
// process. Before, Turn.usage summed Turn.steps, which lists a turn's first
// 3,333 steps (the first 10,000 of its events): a third of this turn's tokens.
// A step may hold several answers (docs/contract.md#append-rules): each is a
// model call, billed, and counted (Step.usage took the step's last only).
// A /chat answer's usage was summed over the turn's first 10,000 answers.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { statementRecorder } from '../helpers/explain.ts';
import { longTurnRecording, longTurnUsage, SHORT_TURN_USAGE } from '../fixtures/recordings/recordings.ts';

/** 200,011 events: a turn of 200,000 (four a step) and a short one. */
const STEPS = 50_000;
/** Rows of "Event" one turn's figures may bring into the process: its brackets' probes and the totals' one row. */
const MOST_ROWS = 20;

const events = statementRecorder(/"Event"/);
let app: TestApp;
let base: string;
let id: string;

/** What longTurnRecording's long turn's first `steps` answers reported, summed here. */
function usageOf(steps: number) {
  let inputTokens = 0;
  let outputTokens = 0;
  let nanoUsd = 0;
  for (let step = 1; step <= steps; step++) {
    const u = longTurnUsage(step);
    inputTokens += u.inputTokens;
    outputTokens += u.outputTokens;
    nanoUsd += Math.round((u.costUsd ?? 0) * 1e9);
  }
  return { inputTokens, outputTokens, costUsd: nanoUsd / 1e9 };
}

const SHORT = {
  inputTokens: SHORT_TURN_USAGE[0].inputTokens + SHORT_TURN_USAGE[1].inputTokens,
  outputTokens: SHORT_TURN_USAGE[0].outputTokens + SHORT_TURN_USAGE[1].outputTokens,
  costUsd: SHORT_TURN_USAGE[1].costUsd,
};

async function imported(body: string): Promise<{ id: string; eventCount: number }> {
  const res = await fetch(`${base}/recordings`, { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
  expect(res.status).toBe(201);
  return ((await res.json()) as { session: { id: string; eventCount: number } }).session;
}

beforeAll(async () => {
  app = await startTestApp({ onQuery: events.onQuery });
  base = app.url.replace(/\/graphql$/, '');
  const session = await imported(longTurnRecording(STEPS, 'one huge turn'));
  expect(session.eventCount).toBe(4 * STEPS + 12);
  id = session.id;
}, 300_000);
afterAll(() => app?.close());

const USAGE = 'usage { inputTokens outputTokens costUsd }';

describe("a turn's totals over all its steps", () => {
  it('Turn.usage, stepCount and toolCallCount of a turn of 200,000 events are exact, read as one row', async () => {
    const query = `query($id: ID!) { session(id: $id) { turnAt(seq: 2) { turn stepCount toolCallCount ${USAGE} } } }`;
    let data: any;
    const started = performance.now();
    const read = await events.during(async () => (data = await app.ok(query, { id })));
    const ms = performance.now() - started;
    const rows = read.reduce((n, s) => n + s.rows, 0);
    console.log(`a turn of ${4 * STEPS} events: its totals in ${ms.toFixed(0)} ms, ${read.length} statements on "Event", ${rows} rows`);
    // The old code: 5,889,411 tokens in of 1,255,025,000 (its first 3,333 steps'), from 10,003 rows in 4 statements.
    expect(data.session.turnAt).toEqual({ turn: 1, stepCount: STEPS, toolCallCount: STEPS, usage: usageOf(STEPS) });
    // Counted, not timed: the rows read bound the work (Postgres sums them; its time is printed above, not asserted).
    expect(rows).toBeLessThanOrEqual(MOST_ROWS);
  }, 60_000);

  it('a list of turns, their steps, and Session.totals agree with them', async () => {
    const query =
      `query($id: ID!) { session(id: $id) { totals { steps toolCalls inputTokens outputTokens costUsd }` +
      ` turns(last: 2) { turn stepsTruncated toolCallCount ${USAGE} steps { step toolCallCount ${USAGE} } } } }`;
    const { session } = await app.ok(query, { id });
    const [long, short] = session.turns;
    expect(long).toMatchObject({ turn: 1, stepsTruncated: true, toolCallCount: STEPS, usage: usageOf(STEPS) });
    // What steps lists is the first steps' (and says so): the turn's figures are not its sum.
    expect(long.steps[0]).toEqual({ step: 1, toolCallCount: 1, usage: usageOf(1) });
    expect(long.steps.length).toBeLessThan(STEPS);
    expect(short.turn).toBe(2);
    const whole = usageOf(STEPS);
    expect(session.totals).toEqual({
      steps: STEPS + 2,
      toolCalls: STEPS,
      inputTokens: whole.inputTokens + SHORT.inputTokens,
      outputTokens: whole.outputTokens + SHORT.outputTokens,
      costUsd: Math.round((whole.costUsd + SHORT.costUsd) * 1e9) / 1e9,
    });
  }, 60_000);

  it('a step of two answers counts both (each was a model call, billed)', async () => {
    const query = `query($id: ID!) { session(id: $id) { lastTurn { turn toolCallCount ${USAGE} steps { step toolCallCount ${USAGE} } } } }`;
    const { lastTurn } = (await app.ok(query, { id })).session;
    // The old code counted the step's last answer only: 11 in, 5 out.
    expect(lastTurn).toEqual({ turn: 2, toolCallCount: 0, usage: SHORT, steps: [{ step: 1, toolCallCount: 0, usage: SHORT }] });
  });

  it("a /chat answer's usage is over all its turn's answers (more than 10,000 of them)", async () => {
    // A turn a restart interrupted: the chat's answer is its replay (GET /chat/<id>/stream), which ends with the usage.
    // One step of many answers (each a model call), which the replay passes quickly: it has no text and no calls.
    const answers = 10_050;
    const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_manyanswers', title: 'many answers' } }];
    const add = (type: string, data: unknown) => lines.push({ seq: lines.length - 1, type, data });
    add('inbox/add', { inputId: 'in_1', text: 'go' });
    add('inbox/remove', { inputId: 'in_1', reason: 'taken' });
    add('turn/start', { turn: 1, inputId: 'in_1' });
    add('step/start', { turn: 1, step: 1 });
    for (let a = 1; a <= answers; a++) add('model/message', { turn: 1, step: 1, text: '', toolCalls: [], usage: longTurnUsage(a) });
    add('step/end', { turn: 1, step: 1, reason: 'interrupted' });
    add('turn/end', { turn: 1, reason: 'interrupted' });
    const chat = await imported(`${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);

    const res = await fetch(`${base}/chat/${chat.id}/stream`);
    expect(res.status).toBe(200);
    const chunks = (await res.text())
      .split('\n')
      .filter((l) => l.startsWith('data: {'))
      .map((l) => JSON.parse(l.slice(6)) as { type: string; messageMetadata?: { reason?: string; usage?: unknown } });
    const finish = chunks.at(-1);
    const { inputTokens, outputTokens } = usageOf(answers);
    // The old code: the first 10,000 answers' only, 51,005,000 tokens in of 51,511,275.
    expect(finish).toMatchObject({ type: 'finish', messageMetadata: { reason: 'interrupted', usage: { inputTokens, outputTokens } } });
  }, 120_000);
});
