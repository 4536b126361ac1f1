// sessionTurns(afterSeq) and a /chat replay of a turn of 200,000 events, to a
// client that stops reading at first: the log is read as the client reads
// (turn-stream.ts), so the whole turn arrives, every update once and in
// order. Before, the log was read into the subscriber's queue without waiting
// and the subscription ended with SUBSCRIBER_TOO_SLOW past 10,000 updates.
import WebSocket from 'ws';
import { createClient } from 'graphql-ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { importedRecording } from '../helpers/chat-replay.ts';
import { multiAnswerCallId, multiAnswerTurnRecording } from '../fixtures/recordings/recordings.ts';

const STEPS = 50_000;
let app: TestApp;
let base: string;
let id: string;

beforeAll(async () => {
  app = await startTestApp();
  base = app.url.replace(/\/graphql$/, '');
  const session = await importedRecording(base, multiAnswerTurnRecording(STEPS, 1, 'ses_twohundredk'));
  expect(session.eventCount).toBe(4 + 4 * STEPS);
  id = session.id;
}, 600_000);
afterAll(() => app?.close());

/** A `ws` WebSocket whose TCP socket the test can pause (a client that stops reading). */
const sockets: WebSocket[] = [];
class RecordedWebSocket extends WebSocket {
  constructor(...args: ConstructorParameters<typeof WebSocket>) {
    super(...args);
    sockets.push(this);
  }
}
const tcpOf = (ws: WebSocket) => (ws as unknown as { _socket: import('node:net').Socket })._socket;

describe('a replay of a turn of 200,000 events to a client that stops reading first', () => {
  it('sessionTurns(afterSeq: -1) over graphql-ws: every update once, in order', async () => {
    const client = createClient({ url: app.url.replace(/^http/, 'ws'), webSocketImpl: RecordedWebSocket, lazy: true, retryAttempts: 0 });
    const updates: Array<{ kind: string; seq: number | null; text: string | null; callId: string | null }> = [];
    const started = performance.now();
    const done = new Promise<void>((resolve, reject) => {
      client.subscribe(
        { query: `subscription($id: ID!) { sessionTurns(sessionId: $id, afterSeq: -1) { kind seq text callId } }`, variables: { id } },
        {
          next: (r) => {
            if (r.errors) return reject(new Error(JSON.stringify(r.errors)));
            const u = r.data!.sessionTurns as (typeof updates)[number];
            updates.push(u);
            if (u.kind === 'TURN_ENDED') resolve();
          },
          error: (e) => reject(e instanceof Error ? e : new Error(JSON.stringify(e))),
          complete: () => reject(new Error(`completed after ${updates.length} updates`)),
        },
      );
    });
    // The client stops reading as soon as its socket is open, for three seconds: the server's buffers fill.
    const deadline = Date.now() + 10_000;
    while (!sockets.length || !tcpOf(sockets[0])) {
      if (Date.now() > deadline) throw new Error('no socket');
      await new Promise((r) => setTimeout(r, 5));
    }
    tcpOf(sockets[0]).pause();
    await new Promise((r) => setTimeout(r, 3000));
    tcpOf(sockets[0]).resume();
    await done;
    console.log(`sessionTurns replay of ${4 + 4 * STEPS} events: ${updates.length} updates in ${(performance.now() - started).toFixed(0)} ms`);
    await client.dispose();
    // The old code: an error "subscriber too slow" after about 10,000 updates.
    const seqs = updates.filter((u) => u.seq !== null).map((u) => u.seq!);
    // Every event but the inbox's and the answers' is an update (turn/start at 2, then each step's three).
    const expected = [2];
    for (let step = 0; step < STEPS; step++) expected.push(3 + 4 * step, 5 + 4 * step, 6 + 4 * step);
    expected.push(3 + 4 * STEPS);
    expect(seqs.length).toBe(expected.length);
    expect(seqs.every((s, i) => s === expected[i])).toBe(true);
    const texts = updates.filter((u) => u.kind === 'TEXT_DELTA').map((u) => u.text);
    expect(texts.length).toBe(STEPS);
    expect(texts.every((t, i) => t === `step ${i + 1}`)).toBe(true);
    const finished = updates.filter((u) => u.kind === 'TOOL_FINISHED').map((u) => u.callId);
    expect(finished.every((c, i) => c === multiAnswerCallId(i + 1, 1))).toBe(true);
  }, 600_000);

  it('GET /chat/<id>/stream: every call once, its input before its output, and the end', async () => {
    const res = await fetch(`${base}/chat/${id}/stream`);
    expect(res.status).toBe(200);
    const reader = res.body!.getReader();
    await new Promise((r) => setTimeout(r, 3000)); // a client that reads nothing at first
    const started = performance.now();
    const decoder = new TextDecoder();
    let rest = '';
    const chunks: Array<{ type: string; toolCallId?: string; errorText?: string; messageMetadata?: { reason?: string } }> = [];
    for (let r = await reader.read(); !r.done; r = await reader.read()) {
      const frames = (rest + decoder.decode(r.value, { stream: true })).split('\n\n');
      rest = frames.pop()!;
      for (const f of frames) if (f.startsWith('data: {')) chunks.push(JSON.parse(f.slice(6)));
    }
    console.log(`a /chat replay of ${4 + 4 * STEPS} events: ${chunks.length} chunks in ${(performance.now() - started).toFixed(0)} ms`);
    const errors = chunks.filter((c) => c.type === 'error').map((c) => c.errorText);
    expect(errors).toEqual([expect.stringMatching(/interrupted/)]);
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', messageMetadata: { reason: 'interrupted' } });
    const tools = chunks.filter((c) => c.type === 'tool-input-available' || c.type === 'tool-output-available');
    expect(tools.length).toBe(2 * STEPS);
    expect(
      tools.every(
        (c, i) => c.toolCallId === multiAnswerCallId(Math.floor(i / 2) + 1, 1) && c.type === (i % 2 ? 'tool-output-available' : 'tool-input-available'),
      ),
    ).toBe(true);
  }, 600_000);
});
