// Fencing told the truth (docs/runners.md "Lost answers"): the runner SDK on a
// real server. A zombie (a runner whose renewals stopped: a long pause) finds
// on its next append that a new holder claimed the session and repaired the
// open turn with closers of the very types the zombie was writing; the SDK
// throws LeaseLostError instead of taking the repair's events for its own
// lost batch. A batch that did go in (a retry after a lost answer) is still
// recognised as the runner's own.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';
import { ForklineRunner, LeaseLostError, type RunnerEvent, type RunnerSession } from '@forkline/runner';

let service: ServiceProcess;
const runners: ForklineRunner[] = [];

async function gql(query: string, variables?: Record<string, unknown>) {
  const { body } = await postGraphQL(service.url, query, variables);
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}
const events = async (id: string) =>
  (await gql(`query($id: ID!) { session(id: $id) { events(first: 500) { edges { node { seq type data synthetic } } } } }`, { id })).session.events.edges.map(
    (e: any) => e.node,
  );
const runner = (runnerId: string) => {
  const r = new ForklineRunner({ url: service.url, pool: 'fence', runnerId, leaseMs: 3000 });
  runners.push(r);
  return r;
};

beforeAll(async () => {
  service = await startService();
});
afterAll(async () => {
  await Promise.all(runners.map((r) => r.close()));
  await service?.stop();
});

describe('a zombie runner racing a new holder', () => {
  it("is told its lease is lost when the stored events are the repair's, not its own", async () => {
    const id = (await gql(`mutation { createSession(input: {runner: "fence"}) { id } }`)).createSession.id;
    await gql(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "email bob"}) { inputId } }`, { id });
    const zombie = (await runner('zombie').claim(id))!;
    await zombie.declareTools([{ name: 'send_email', effect: 'side-effects' }]);
    const turn = zombie.turn(await zombie.modelRequest());
    await turn.startStep();
    await turn.message({ text: '', toolCalls: [{ id: 'c1', name: 'send_email', arguments: '{"to":"bob"}' }] });
    // The zombie pauses: no renewals; its lease runs out and a new holder claims, repairing the open turn.
    clearInterval((zombie as unknown as { renewal: NodeJS.Timeout }).renewal);
    let holder: Awaited<ReturnType<ForklineRunner['claim']>>;
    await waitFor(async () => !!(holder = await runner('holder').claim(id)), { what: "the new holder's claim", timeoutMs: 10_000 });
    const repaired = await events(id);
    expect(repaired.slice(-3).map((e: any) => [e.type, e.synthetic])).toEqual([
      ['tool/result', true],
      ['step/end', true],
      ['turn/end', true],
    ]);
    // The zombie's tool finished: it writes the result and closes the turn, the same types the repair wrote.
    const late: RunnerEvent[] = [
      { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: `res_${id}_c1`, status: 'ok', content: 'sent', name: 'send_email' } },
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ];
    await expect(zombie.append(late)).rejects.toBeInstanceOf(LeaseLostError);
    expect(await events(id)).toEqual(repaired);
    await holder!.release();
  });

  it('still takes a batch stored exactly as sent for its own (an answer lost after the write)', async () => {
    const id = (await gql(`mutation { createSession(input: {runner: "fence"}) { id } }`)).createSession.id;
    const { inputId } = (await gql(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "hi"}) { inputId } }`, { id })).sendMessage;
    const session = (await runner('writer').claim(id))!;
    await session.declareTools([{ name: 'lookup', effect: 'read-only' }]);
    const request = await session.modelRequest();
    const batch: RunnerEvent[] = [
      { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId } },
      { type: 'step/start', data: { turn: 1, step: 1 } },
      // No effect given: forkline fills in the declared one, which is still this batch.
      { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{}' }] } },
    ];
    // The batch goes in (the declaration first, as the SDK sends it with its first append), but the runner
    // never hears back: its next attempt finds the log grown by exactly it.
    const declaration = { type: 'session/runner-tools', data: { tools: [{ name: 'lookup', effect: 'read-only' }] } };
    const sent = await postGraphQL(service.url, `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`, {
      input: { sessionId: id, leaseToken: session.leaseToken, expectedEventCount: request.eventCount, events: [declaration, ...batch] },
    });
    expect(sent.body.errors).toBeUndefined();
    const stored = await session.append(batch);
    expect(stored.map((e) => e.type)).toEqual(batch.map((e) => e.type));
    expect((stored[3].data as any).toolCalls[0].effect).toBe('read-only');
    await session.release();
  });
});

describe('a runner whose sessions fail', () => {
  it('backs off before claiming again instead of re-claiming the failing session in a tight loop', async () => {
    const id = (await gql(`mutation { createSession(input: {runner: "failing"}) { id } }`)).createSession.id;
    await gql(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "hi"}) { inputId } }`, { id });
    const r = new ForklineRunner({ url: service.url, pool: 'failing', runnerId: 'failing' });
    runners.push(r);
    let claims = 0;
    const stop = new AbortController();
    // Each failure releases the session, which is offered again at once.
    const running = r.run(
      async () => {
        claims++;
        throw new Error('this runner fails every session it claims');
      },
      { signal: stop.signal },
    );
    await waitFor(() => claims >= 1, { what: 'the first claim', timeoutMs: 20_000 });
    // Claimed again at once, a few seconds hold dozens of claims; backing off (0.25-0.5 s, doubling), at most five.
    const first = claims;
    await new Promise((resolve) => setTimeout(resolve, 4000));
    stop.abort();
    await running;
    expect(claims - first).toBeLessThanOrEqual(5);
    expect(claims - first).toBeGreaterThanOrEqual(1); // it does try again
  });
});

describe('the runner SDK writes a tool turn in four batches', () => {
  it('declares its tools once, in the first batch of the first claim, and never again while the set is the same', async () => {
    const id = (await gql(`mutation { createSession(input: {runner: "fence"}) { id } }`)).createSession.id;
    const r = runner('batches');
    const writes: number[] = [];
    const serveOnce = async (text: string) => {
      await gql(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: text });
      const served = await r.serve(id, async (session) => {
        await session.declareTools([{ name: 'lookup', effect: 'read-only' }]);
        const turn = session.turn(await session.modelRequest());
        const append = session.append.bind(session);
        session.append = async (batch) => (writes.push(batch.length), append(batch));
        await turn.startStep();
        await turn.message({ text: '', toolCalls: [{ id: `c-${text}`, name: 'lookup', arguments: '{}' }] });
        await turn.result({ id: `c-${text}`, name: 'lookup' }, 'ok', 'found');
        await turn.startStep();
        await turn.message({ text: 'done', toolCalls: [] });
        await turn.end('completed');
      });
      expect(served).toBe(true);
    };
    await serveOnce('one');
    await serveOnce('two');
    // Per turn: the opening with the first step's start; the call; the result with the step's end and the next start; the answer with the ends.
    expect(writes).toEqual([3, 1, 3, 3, 3, 1, 3, 3]);
    const evs = await events(id);
    const declared = evs.filter((e: any) => e.type === 'session/runner-tools');
    expect(declared).toHaveLength(1);
    // Stored with the first batch: right before the first turn's opening.
    expect(evs[declared[0].seq + 1].type).toBe('inbox/remove');
    expect(evs.filter((e: any) => e.type === 'model/message' && e.data.toolCalls.length).map((e: any) => e.data.toolCalls[0].effect)).toEqual([
      'read-only',
      'read-only',
    ]);
    expect(evs.filter((e: any) => e.type === 'turn/end').map((e: any) => e.data.reason)).toEqual(['completed', 'completed']);
  });
});

describe('the runner SDK and rule call first (docs/runners.md "Why the call goes first")', () => {
  /** A session of the pool with a message waiting, served by `work` with the SDK's appends recorded. */
  async function served(text: string, work: (session: RunnerSession, batches: RunnerEvent[][]) => Promise<void>) {
    const id = (await gql(`mutation { createSession(input: {runner: "fence"}) { id } }`)).createSession.id as string;
    await gql(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: text });
    const batches: RunnerEvent[][] = [];
    const ok = await runner(`call-first-${text}`).serve(id, async (session) => {
      await session.declareTools([{ name: 'lookup', effect: 'read-only' }]);
      const append = session.append.bind(session);
      session.append = async (batch) => (batches.push(batch), append(batch));
      await work(session, batches);
    });
    return { id, ok, batches };
  }
  const resultsBesideTheirCall = (batches: RunnerEvent[][]) =>
    batches.filter((b) => {
      const called = new Set(b.flatMap((e) => (e.type === 'model/message' ? (e.data.toolCalls as Array<{ id: string }>).map((c) => c.id) : [])));
      return b.some((e) => e.type === 'tool/result' && called.has(e.data.callId as string));
    });

  it('TurnWriter: a result given before the call was stored, or a cancel of calls not started, goes in a later append than the call', async () => {
    const { id, ok, batches } = await served('hasty', async (session) => {
      const turn = session.turn(await session.modelRequest());
      await turn.startStep();
      // The app does not wait for the call's append before it answers the call.
      const stored = turn.message({ text: '', toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{}' }] });
      const answered = turn.result({ id: 'c1', name: 'lookup' }, 'ok', 'found');
      await Promise.all([stored, answered]);
      await turn.startStep();
      // Cancelled before its tools started: the calls' results are had without running them.
      const second = turn.message({ text: '', toolCalls: [{ id: 'c2', name: 'lookup', arguments: '{}' }] });
      const cancelled = turn.cancelUnstarted('the user cancelled');
      await Promise.all([second, cancelled]);
      await turn.end('failed', 'cancelled');
    });
    expect(ok).toBe(true);
    expect(resultsBesideTheirCall(batches)).toEqual([]);
    const evs = await events(id);
    expect(evs.filter((e: any) => e.type === 'tool/result').map((e: any) => [e.data.callId, e.data.status])).toEqual([
      ['c1', 'ok'],
      ['c2', 'error'],
    ]);
    expect(evs.at(-1).data).toEqual({ turn: 1, reason: 'failed' });
  });

  it("a raw append of a call with its result is refused (BAD_USER_INPUT, rule call first, the result's seq); nothing of it is written", async () => {
    let refusal: any;
    let before = 0;
    const { id } = await served('raw', async (session) => {
      const request = await session.modelRequest();
      await session.storeDeclaredTools();
      before = (await events(session.sessionId)).length;
      const batch: RunnerEvent[] = [
        { type: 'inbox/remove', data: { inputId: request.inputId, reason: 'taken' } },
        { type: 'turn/start', data: { turn: 1, inputId: request.inputId } },
        { type: 'step/start', data: { turn: 1, step: 1 } },
        { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'lookup', arguments: '{}' }] } },
        { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r-c1', status: 'error', content: 'not run', name: 'lookup' } },
      ];
      refusal = await session.append(batch).then(
        () => undefined,
        (err) => err,
      );
    });
    expect(refusal?.code).toBe('BAD_USER_INPUT');
    expect(refusal?.errors?.[0]?.extensions).toMatchObject({ rule: 'call first', seq: before + 4 });
    expect(await events(id)).toHaveLength(before);
  });
});
