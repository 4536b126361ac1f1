// The keyless scripted model is the default of a service started with no
// configuration (docs/getting-started.md), so a user's message reaches it
// unchanged: its answer echoes every word, and each word is streamed as a
// delta. A message of as many words as the input limit allows is sent through
// the real server (sendMessage over GraphQL, and /chat) while another client's
// small requests (GET /healthz) go on: the longest of them is what that client
// waited. The answer is still the echo, streamed word by word.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { anyData } from '../helpers/event-data.ts';
import { WAIT_BOUND_MS, servedMeanwhile } from '../helpers/event-loop.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';
import { MAX_MESSAGE_CHARS } from '../../src/core/text-limits.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

/** 100,000 one-letter lines: 199,999 characters, within the input limit, and 100,000 words to echo. */
const manyWords = Array.from({ length: 100_000 }, () => 'x').join('\n');
const turns = agentTurns(() => app, 'scripted echo');

describe('the scripted model echoing a message of 100,000 words', () => {
  it('sendMessage: answered with the whole echo while another client is served (before: the loop held ~15 s, a probe was reset)', async () => {
    expect(manyWords.length).toBeLessThanOrEqual(MAX_MESSAGE_CHARS);
    const id = await turns.create();
    const deltas: string[] = [];
    const onUpdate = (u: TurnUpdate) => u.kind === 'TEXT_DELTA' && deltas.push(u.text ?? '');
    app.turnUpdates.on(id, onUpdate);
    try {
      const { waitedMs, probes } = await servedMeanwhile(app.url, () => turns.turn(id, manyWords));
      const answer = (await turns.log(id)).find((e) => e.type === 'model/message');
      expect(anyData(answer!).text).toBe(`Echo: ${manyWords}`);
      expect(await turns.tail(id, 1)).toEqual([['turn/end', 'completed']]);
      // Streamed as before: one delta a word.
      expect(deltas.length).toBe(100_001);
      expect(deltas.join('')).toBe(`Echo: ${manyWords}`);
      expect(probes).toBeGreaterThan(1);
      expect(waitedMs).toBeLessThan(WAIT_BOUND_MS); // before: ~15 s (the probe's connection was reset)
    } finally {
      app.turnUpdates.off(id, onUpdate);
    }
  });

  it('/chat: the echo streamed to the client, whole, while another client is served', async () => {
    const body = JSON.stringify({
      id: 'scripted-echo',
      messages: [{ id: 'last', role: 'user', parts: [{ type: 'text', text: manyWords }] }],
      trigger: 'submit-message',
    });
    const chat = async () => {
      const res = await fetch(app.url.replace(/\/graphql$/, '/chat'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
        body,
      });
      return { status: res.status, text: await res.text() };
    };
    const { result, waitedMs } = await servedMeanwhile(app.url, chat);
    expect(result.status).toBe(200);
    const chunks = [...result.text.matchAll(/^data: (\{.*\})$/gm)].map((m) => JSON.parse(m[1]) as { type: string; delta?: string; finishReason?: string });
    const deltas = chunks.filter((c) => c.type === 'text-delta');
    expect(deltas.map((c) => c.delta).join('')).toBe(`Echo: ${manyWords}`);
    expect(deltas.length).toBeGreaterThan(1); // a stream, not one answer at the end
    expect(chunks.at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
  });

  it('the summary after a tool call echoes the same words, as bounded', async () => {
    const id = await turns.create();
    const { waitedMs } = await servedMeanwhile(app.url, () => turns.turn(id, `!call clock {}\n${manyWords.slice(16)}`)); // within the limit
    const answers = (await turns.log(id)).filter((e) => e.type === 'model/message').map((e) => anyData(e).text as string);
    expect(answers.at(-1)).toMatch(new RegExp(`^Done \\(${manyWords.slice(0, 99)}[^]*\\)\\. Tool results:\\n- call_1_1_1: `));
    expect(await turns.tail(id, 1)).toEqual([['turn/end', 'completed']]);
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
  });

  it('13,000 tool calls in one step are refused past the bound without holding the loop', async () => {
    const id = await turns.create();
    const calls = Array.from({ length: 13_000 }, () => '!call clock {}').join('\n');
    const { waitedMs } = await servedMeanwhile(app.url, () => turns.turn(id, calls));
    expect(await turns.tail(id, 1)).toEqual([['turn/end', 'failed']]);
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
  });
});
