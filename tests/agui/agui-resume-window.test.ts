// A resume long after its interrupt (docs/agui.md "Tool approval"): while a
// turn waits for approval the thread goes on growing (here: messages queued
// behind it), so MESSAGES_SNAPSHOT's window of the latest events no longer
// holds what the interrupted run showed. The interrupt named a call by its
// client id (a call id reused from an earlier turn: `c1_t2s1`); the resume must
// still map it back to the call, and stream the call's result under the id the
// client holds. Read with @ag-ui/client's own event application (HttpAgent).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpAgent } from '@ag-ui/client';
import type { Message } from '@ag-ui/core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { SNAPSHOT_EVENTS } from '../../src/agui/agui-handler.ts';

let app: TestApp;
let url: string;

beforeAll(async () => {
  app = await startTestApp();
  url = app.url.replace(/\/graphql$/, '/agui');
});
afterAll(async () => {
  await app?.close();
});

type Assistant = Extract<Message, { role: 'assistant' }>;
type Tool = Extract<Message, { role: 'tool' }>;

describe('an AG-UI resume after the snapshot window moved', () => {
  // Turn 1 holds 4 snapshot events (input, start, answer, result), turn 2 (the interrupted one) 3 so far.
  it.each([
    ['the interrupted turn still in the window, the earlier call that took its id out of it', SNAPSHOT_EVENTS - 3],
    ['no turn left in the window at all', SNAPSHOT_EVENTS + 100],
  ])(
    '%s: the interrupt’s id maps back to its call, whose result reaches the client under that id',
    async (_, queued) => {
      const { createSession } = await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, {
        i: { title: 'window', runner: 'ext', approvalRequired: ['note'] },
      });
      const id = createSession.id as string;
      const count = async () => (await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id })).session.eventCount as number;
      let token = 0;
      const append = async (evs: Array<[string, unknown]>) => {
        const r = await app.gql(`mutation($i: AppendEventsInput!) { appendEvents(input: $i) { session { eventCount } } }`, {
          i: { sessionId: id, leaseToken: token, expectedEventCount: await count(), events: evs.map(([type, data]) => ({ type, data })) },
        });
        expect(r.errors).toBeUndefined();
      };
      const last = (type: string) => app.services.store.log.lastOfType(id, type);
      const waitFor = (type: string) => expect.poll(async () => (await last(type)) !== undefined, { timeout: 15_000 }).toBe(true);

      const { sendMessage } = await app.ok(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "first"}) { inputId } }`, { id });
      token = (await app.ok(`mutation($id: ID!) { claimSession(input: {sessionId: $id, runnerId: "r1"}) { lease { token } } }`, { id })).claimSession.lease
        .token;
      await append([
        ['inbox/remove', { inputId: sendMessage.inputId, reason: 'taken' }],
        ['turn/start', { turn: 1, inputId: sendMessage.inputId }],
        ['step/start', { turn: 1, step: 1 }],
        ['model/message', { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'clock', arguments: '{"n":1}', effect: 'read-only' }] }],
        ['tool/result', { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'ok', content: 'one', name: 'clock' }],
        ['step/end', { turn: 1, step: 1, reason: 'completed' }],
        ['turn/end', { turn: 1, reason: 'completed' }],
      ]);

      // The AG-UI run's turn calls `c1` again, a tool that needs approval: the run ends with the interrupt.
      const agent = new HttpAgent({ url, threadId: id });
      agent.addMessage({ id: 'm2', role: 'user', content: 'second' });
      const first = agent.runAgent({ runId: `window-1-${queued}` });
      await waitFor('plugin/agui/run');
      const input = (await last('inbox/add'))!.data as { inputId: string };
      await append([
        ['inbox/remove', { inputId: input.inputId, reason: 'taken' }],
        ['turn/start', { turn: 2, inputId: input.inputId }],
        ['step/start', { turn: 2, step: 1 }],
        ['model/message', { turn: 2, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'note', arguments: '{"n":2}', effect: 'read-only' }] }],
        ['tool/approval-request', { turn: 2, step: 1, callId: 'c1' }],
      ]);
      await first;
      expect(agent.pendingInterrupts.map((i) => i.id)).toEqual(['c1_t2s1']);
      const shown = agent.messages.find((m): m is Assistant => m.role === 'assistant' && m.id === 'msg_2_1');
      expect(shown?.toolCalls?.map((c) => c.id)).toEqual(['c1_t2s1']);

      // Messages queued while the turn waits move the latest-events window past what the run showed.
      const store = app.services.store.forTenant({ tenant: 'local' });
      for (let i = 0; i < queued; i += 1000)
        await store.append(
          id,
          Array.from({ length: Math.min(1000, queued - i) }, (_, j) => ({ type: 'inbox/add', data: { inputId: `q${i + j}`, text: `later ${i + j}` } })),
        );

      let failure: string | undefined;
      const resumed = agent.runAgent(
        { runId: `window-2-${queued}`, resume: [{ interruptId: 'c1_t2s1', status: 'resolved', payload: { approved: true } }] },
        { onRunErrorEvent: ({ event }) => void (failure = `${event.code}: ${event.message}`) },
      );
      void resumed.catch((err: Error) => (failure ??= err.message));
      for (let i = 0; i < 600 && failure === undefined && !(await last('tool/approval')); i++) await new Promise((r) => setTimeout(r, 25));
      expect(failure).toBeUndefined();
      expect((await last('tool/approval'))!.data).toMatchObject({ callId: 'c1', decision: 'approved' });
      await append([
        ['tool/result', { turn: 2, step: 1, callId: 'c1', resultId: 'r2', status: 'ok', content: 'two', name: 'note' }],
        ['step/end', { turn: 2, step: 1, reason: 'completed' }],
        ['turn/end', { turn: 2, reason: 'completed' }],
      ]);
      await resumed;
      // The client attached each result to the call it was shown under.
      const resultsOf = (callId: string) => agent.messages.filter((m): m is Tool => m.role === 'tool' && m.toolCallId === callId).map((m) => m.content);
      expect(resultsOf('c1_t2s1')).toEqual(['two']);
      expect(resultsOf('c1')).toEqual(['one']);
      expect(agent.pendingInterrupts).toEqual([]);
    },
    60_000,
  );
});
