// Direct sessionEvents delivery (http/graphql/ws-delivery.ts, its payloads
// from http/graphql/event-projection.ts) sends, byte for byte, the graphql-ws
// messages graphql-ws sends executing the same selection with graphql-js —
// for events of every type: each core type, plugin events, inherited and
// synthetic ones. Two raw graphql-transport-ws sockets per session: one with
// the selection plus a directive (which keeps it off the direct path: graphql-ws
// executes it), then one with the plain selection (delivered directly).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { FIXTURES, readFixture } from '../fixtures/recordings/recordings.ts';
import { CORE_EVENT_TYPES } from '../../src/core/events.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app.close());

const FIELDS = '__typename id seq type data inherited synthetic createdAt sessionId n: seq ...F ... on Node { id }';
const PLAIN = `subscription($id: ID!) { ev: sessionEvents(sessionId: $id) { ${FIELDS} } } fragment F on Event { t: type data }`;
const EXECUTED = `subscription($id: ID!) { ev: sessionEvents(sessionId: $id) { ${FIELDS.replace('n: seq', 'n: seq @include(if: true)')} } } fragment F on Event { t: type data }`;

/** The raw text of every `next` message a graphql-transport-ws socket gets for one subscription (id "1"). */
function rawSubscription(query: string, variables: Record<string, unknown>) {
  const socket = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
  const frames: string[] = [];
  const errors: string[] = [];
  socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init' })));
  socket.on('message', (data) => {
    const text = data.toString();
    const type = JSON.parse(text).type;
    if (type === 'connection_ack') socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query, variables } }));
    else if (type === 'next') frames.push(text);
    else if (type === 'error') errors.push(text);
  });
  return {
    frames,
    async count(n: number) {
      await waitFor(
        () => {
          if (errors.length) throw new Error(errors[0]);
          return frames.length >= n;
        },
        { what: `${n} frames (have ${frames.length})` },
      );
      return frames;
    },
    close: () => new Promise<void>((resolve) => (socket.once('close', () => resolve()), socket.close())),
  };
}

const gqlOk = async (query: string, variables: Record<string, unknown>) => app.ok(query, variables);

describe('directly delivered sessionEvents', () => {
  it('are the messages graphql-ws sends executing the selection, byte for byte, for every event type', async () => {
    const sessions: Array<{ id: string; eventCount: number }> = [];
    for (const name of FIXTURES) {
      const { importRecording } = await gqlOk('mutation($r: String!) { importRecording(recording: $r) { id eventCount } }', { r: readFixture(name) });
      sessions.push(importRecording);
    }
    const { createSession } = await gqlOk('mutation($input: CreateSessionInput!) { createSession(input: $input) { id eventCount } }', {
      input: { title: 'tools "quoted" ✓ \u2028', tools: ['clock'], instructions: 'Answer "briefly" ✓', approvalRequired: ['note_write'] },
    });
    sessions.push(createSession);
    await app.services.store.append(createSession.id, [
      { type: 'plugin/test/any', data: { nested: [1, { a: null }], text: 'é "q" </script> \u2029' } },
      {
        type: 'session/runner-tools',
        data: { tools: [{ name: 'send_email', description: 'Sends "mail"', inputSchema: { type: 'object' }, effect: 'side-effects' }] },
      },
      // A closed turn whose call waited for approval and was denied.
      { type: 'turn/start', data: { turn: 1, inputId: 'in_approval' } },
      { type: 'step/start', data: { turn: 1, step: 1 } },
      { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'note_write', arguments: '{"key":"k","value":"v"}' }] } },
      { type: 'tool/approval-request', data: { turn: 1, step: 1, callId: 'c1' } },
      { type: 'tool/approval', data: { callId: 'c1', decision: 'denied', reason: 'not "now" ✓ \u2028', by: 'local' } },
      { type: 'tool/result', data: { turn: 1, step: 1, callId: 'c1', resultId: 'r1', status: 'error', content: 'denied' } },
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ]);
    createSession.eventCount += 10;
    // A fork at the crashed recording's open tail: inherited events and synthetic closers.
    const crashed = sessions[FIXTURES.indexOf('v3-crashed.jsonl')];
    const { forkSession } = await gqlOk('mutation($input: ForkSessionInput!) { forkSession(input: $input) { session { id eventCount } } }', {
      input: { sessionId: crashed.id, atSeq: crashed.eventCount - 1 },
    });
    sessions.push(forkSession.session);

    // graphql-js first (the fork's agent may append a turn meanwhile: the log only grows, so prefixes compare).
    const before = app.server.wsDelivery.counts.frames;
    const executed: string[][] = [];
    for (const { id, eventCount } of sessions) {
      const sub = rawSubscription(EXECUTED, { id });
      executed.push((await sub.count(eventCount)).slice(0, eventCount));
      await sub.close();
    }
    expect(app.server.wsDelivery.counts.frames).toBe(before); // none of it delivered directly
    const types = new Set<string>();
    const flags = new Set<string>();
    let total = 0;
    for (const [i, { id, eventCount }] of sessions.entries()) {
      const sub = rawSubscription(PLAIN, { id });
      const got = (await sub.count(eventCount)).slice(0, eventCount);
      expect(got).toEqual(executed[i]);
      for (const frame of got) {
        const ev = JSON.parse(frame).payload.data.ev;
        types.add(ev.type);
        flags.add(`${ev.inherited}/${ev.synthetic}`);
      }
      total += eventCount;
      await sub.close();
    }
    // Every core type and a plugin one, live, inherited and synthetic events, all through the direct path.
    expect([...types].filter((t) => !t.startsWith('plugin/')).sort()).toEqual([...CORE_EVENT_TYPES].sort());
    expect([...types].some((t) => t.startsWith('plugin/'))).toBe(true);
    expect(flags).toEqual(new Set(['false/false', 'true/false', 'false/true', 'true/true']));
    expect(app.server.wsDelivery.counts.frames - before).toBeGreaterThanOrEqual(total);
  });
});
