// Compaction of runner sessions through GraphQL. compactSession on an idle
// runner session returns with the compaction written by forkline's
// summariser (the session's model), between the runner's turns: a runner
// holding the session mid-turn is waited for. A request over the session's
// budget says so (ModelRequest.compaction, with the history to summarise); the
// runner writes the compaction with its own model and the next request holds
// the summary instead of that history.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
});

const REQUEST = `messages turn step inputId inTurn eventCount compaction { reason fromSeq throughSeq estimatedTokens thresholdTokens messages }`;
const create = async (input: Record<string, unknown>) =>
  (await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, { i: input })).createSession.id as string;
const send = (sessionId: string, text: string) => app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId, text } });
const claim = async (sessionId: string) =>
  (
    await app.ok(`mutation($i: ClaimSessionInput!) { claimSession(input: $i) { lease { token } session { modelRequest { ${REQUEST} } } } }`, {
      i: { sessionId, runnerId: 'cmp-runner' },
    })
  ).claimSession;
const append = async (sessionId: string, token: number, expectedEventCount: number, events: unknown[], release = false) =>
  (
    await app.ok(`mutation($i: AppendEventsInput!) { appendEvents(input: $i) { eventCount released events { seq type } } }`, {
      i: { sessionId, leaseToken: token, expectedEventCount, events, release },
    })
  ).appendEvents;
const request = async (id: string) => (await app.ok(`query($id: ID!) { session(id: $id) { runnerHolder modelRequest { ${REQUEST} } } }`, { id })).session;
const log = async (id: string) => await app.services.store.log.page(id, -1, 10_000);

/** A turn as a runner writes it: the input taken, one step with an answer, the end (releasing the lease). */
function answerTurn(req: { turn: number; inputId: string }, text: string) {
  return [
    { type: 'inbox/remove', data: { inputId: req.inputId, reason: 'taken' } },
    { type: 'turn/start', data: { turn: req.turn, inputId: req.inputId } },
    { type: 'step/start', data: { turn: req.turn, step: 1 } },
    { type: 'model/message', data: { turn: req.turn, step: 1, text, toolCalls: [] } },
    { type: 'step/end', data: { turn: req.turn, step: 1, reason: 'completed' } },
    { type: 'turn/end', data: { turn: req.turn, reason: 'completed' } },
  ];
}

async function runOneTurn(id: string, text: string) {
  const c = await claim(id);
  const r = c.session.modelRequest;
  return append(id, c.lease.token, r.eventCount, answerTurn(r, text), true);
}

describe('compactSession on a runner session', () => {
  it('returns with the compaction written by the session model, and the next request holds the summary', async () => {
    const id = await create({ runner: 'cmp' });
    await send(id, 'first question about apples');
    expect((await runOneTurn(id, 'apples are red')).released).toBe(true);
    const before = await log(id);
    const lastTurnEnd = before.findLast((e) => e.type === 'turn/end')!.seq;
    const r = (
      await app.ok(`mutation($i: CompactSessionInput!) { compactSession(input: $i) { fromSeq toSeq summarySeq session { status runnerHolder } } }`, {
        i: { sessionId: id },
      })
    ).compactSession;
    expect(r).toMatchObject({ fromSeq: 0, toSeq: lastTurnEnd, summarySeq: lastTurnEnd + 2, session: { status: 'IDLE', runnerHolder: null } });
    const after = (await log(id)).slice(before.length);
    expect(after.map((e) => e.type)).toEqual(['plugin/compaction/start', 'surface/replace', 'plugin/compaction/end']);
    expect(after[2].data).toMatchObject({ reason: 'manual', summarySeq: r.summarySeq, toSeq: lastTurnEnd });
    // A runner's next request: the summary (a system message), then the new input.
    await send(id, 'and pears?');
    const next = (await request(id)).modelRequest;
    expect(next.messages[0]).toEqual({ role: 'system', content: expect.stringContaining(anyData(after[1]).content as string) });
    expect(next.messages.map((m: any) => m.role)).toEqual(['system', 'user']);
    expect(next.messages.some((m: any) => m.content === 'apples are red')).toBe(false);
    // The runner claims and answers as before.
    expect((await runOneTurn(id, 'pears are green')).released).toBe(true);
  });

  it('waits for the turn a runner is running, then compacts after it', async () => {
    const id = await create({ runner: 'cmp' });
    await send(id, 'one');
    await runOneTurn(id, 'first');
    await send(id, 'two');
    const c = await claim(id);
    const req = c.session.modelRequest;
    const events = answerTurn(req, 'second');
    const mid = await append(id, c.lease.token, req.eventCount, events.slice(0, 3)); // the turn is open
    let settled = false;
    const compacting = app
      .ok(`mutation($i: CompactSessionInput!) { compactSession(input: $i) { toSeq } }`, { i: { sessionId: id } })
      .finally(() => (settled = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(settled).toBe(false); // the runner holds the session
    const end = await append(id, c.lease.token, mid.eventCount, events.slice(3), true);
    expect(end.released).toBe(true);
    const r = (await compacting).compactSession;
    const evs = await log(id);
    expect(r.toSeq).toBe(evs.findLast((e) => e.type === 'turn/end')!.seq); // through the runner's turn, written after it
    expect(evs.slice(-3).map((e) => e.type)).toEqual(['plugin/compaction/start', 'surface/replace', 'plugin/compaction/end']);
  });
});

describe('automatic compaction of a runner session', () => {
  it('the request over the budget says so; the compaction the runner writes with its model is honoured', async () => {
    // A window of 2000 tokens: compaction at 1600 (FORKLINE_COMPACT_AT 0.8).
    const id = await create({ runner: 'cmp', model: { provider: 'scripted', model: 'scripted', contextTokens: 2000 } });
    await send(id, 'short question');
    const first = await claim(id);
    expect(first.session.modelRequest.compaction).toBeNull(); // no completed turn yet, and small
    await append(id, first.lease.token, first.session.modelRequest.eventCount, answerTurn(first.session.modelRequest, 'short answer'), true);
    await send(id, `a long question: ${'lorem ipsum '.repeat(800)}`);
    const c = await claim(id);
    const req = c.session.modelRequest;
    const turnEnd = (await log(id)).findLast((e) => e.type === 'turn/end')!.seq;
    expect(req.compaction).toMatchObject({ reason: 'automatic', fromSeq: 0, throughSeq: turnEnd, thresholdTokens: 1600 });
    expect(req.compaction.estimatedTokens).toBeGreaterThan(1600);
    expect(req.compaction.messages.map((m: any) => m.content)).toEqual(['short question', 'short answer']);
    // The runner's model summarises; it writes the compaction as forkline's agent does.
    const start = await append(id, c.lease.token, req.eventCount, [
      { type: 'plugin/compaction/start', data: { reason: 'automatic', fromSeq: 0, toSeq: turnEnd } },
    ]);
    const replace = await append(id, c.lease.token, start.eventCount, [
      { type: 'surface/replace', data: { fromSeq: 0, toSeq: turnEnd, content: 'The user asked a short question.' } },
    ]);
    const summarySeq = replace.events[0].seq;
    await append(id, c.lease.token, replace.eventCount, [
      { type: 'plugin/compaction/end', data: { fromSeq: 0, toSeq: turnEnd, summarySeq, reason: 'automatic', requests: 1 } },
    ]);
    const next = (await request(id)).modelRequest;
    expect(next.compaction).toBeNull(); // nothing past the compaction to compact
    expect(next.messages.map((m: any) => m.role)).toEqual(['system', 'user']);
    expect(next.messages[0].content).toContain('The user asked a short question.');
    expect(next.turn).toBe(2);
  });
});
