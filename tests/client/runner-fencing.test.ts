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
import { ForklineRunner, LeaseLostError, type RunnerEvent } from '@forkline/runner';

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
  const r = new ForklineRunner({ url: service.url, pool: 'fence', runnerId, leaseMs: 1000 });
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
    // The batch goes in, but the runner never hears back: its next attempt finds the log grown by exactly it.
    await postGraphQL(service.url, `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`, {
      input: { sessionId: id, leaseToken: session.leaseToken, expectedEventCount: request.eventCount, events: batch },
    });
    const stored = await session.append(batch);
    expect(stored.map((e) => e.type)).toEqual(batch.map((e) => e.type));
    expect((stored[3].data as any).toolCalls[0].effect).toBe('read-only');
    await session.release();
  });
});
