// A model's call arguments through the runner SDK's TurnWriter
// (docs/runners.md "What a tool hands back"): they are outside input, and the
// log refuses text holding a NUL or an unpaired surrogate, so the old writer
// sent such an answer as it was, the append was refused and the turn failed.
// It now stores them by forkline's own agent's rule (src/core/storable.ts:
// each becomes U+FFFD). @forkline/runner cannot import src/core: it keeps a
// copy of the rule (storableText), held here to agree with the core's on the
// same inputs, so the two cannot drift; and so is its copy of how an answer's
// calls are recorded (RunCallIds, core/model-calls.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ForklineRunner, RunCallIds, type ChatMessage } from '@forkline/runner';
import { storableText } from '../../packages/runner/src/tool-output.ts';
import { admitCalls } from '../../src/core/model-calls.ts';
import { toStorableText } from '../../src/core/storable.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { runnerSessions } from '../helpers/call-id-sessions.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
}, 60_000);
afterAll(async () => {
  await app?.close();
});

/** Text a model may answer: NULs, lone and paired surrogates, at either end, escaped forms that are already storable. */
const HOSTILE = [
  '{"key":"a\u0000b"}',
  '{"key":"\ud800"}',
  '{"key":"\udfff x"}',
  '\u0000',
  '\udc00\ud800',
  '{"key":"\ud83d\ude00 paired"}',
  '{"key":"\\u0000 escaped"}',
  '{"key":"\ufffd"}',
  '{"key":"end\ud83d"}',
  '{"a":1}',
];

/** `n` strings of pieces that make and break pairs, from a fixed seed (the same inputs every run). */
function mixed(n: number): string[] {
  const pieces = ['a', '\u0000', '\ud800', '\udbff', '\udc00', '\udfff', '\ud83d\ude00', 'é', '\ufffd', '"', '\\'];
  let seed = 0x5eed;
  const next = () => ((seed = (seed * 1103515245 + 12345) & 0x7fffffff), seed);
  return Array.from({ length: n }, () => Array.from({ length: next() % 9 }, () => pieces[next() % pieces.length]).join(''));
}

describe("the runner SDK's copy of the storable-text rule", () => {
  it("agrees with forkline's own (src/core) on every input", () => {
    const inputs = [...HOSTILE, ...mixed(5000)];
    expect(inputs.map(storableText)).toEqual(inputs.map(toStorableText));
  });
});

describe("the runner SDK's copy of how an answer's calls are recorded", () => {
  it("records each call under the id and name forkline's own agent gives it, refusing the same ones for the same reason", () => {
    // At the log's bound of 200 code points, a pair on either side of it: the log counts a pair as one.
    const bound = (c: string) => [
      c.repeat(200),
      c.repeat(201),
      `${c.repeat(199)}\ud83d\ude00`,
      `${c.repeat(200)}\ud83d\ude00`,
      `${c.repeat(198)}\ud83d\ude00z`,
    ];
    const ids = ['a', 'a', '', 'n\u0000', '\ud800', 'call_1', 'earlier', 'call_3', ...bound('x'), ...mixed(40)];
    const names = ['lookup', '', 'l\u0000', 'l\udc00', ...bound('y'), ...mixed(40)];
    const earlier = ['earlier', 'call_2'];
    const history: ChatMessage[] = [
      { role: 'assistant', content: null, tool_calls: earlier.map((id) => ({ id, type: 'function', function: { name: 'lookup', arguments: '{}' } })) },
    ];
    for (let k = 0; k < 600; k++) {
      const calls = Array.from({ length: 1 + (k % 5) }, (_, i) => ({
        id: ids[(k * 7 + i * 3) % ids.length],
        name: names[(k * 5 + i) % names.length],
        arguments: '{}',
      }));
      // Every name offered, as given and as cut (which tools a request offers is not this rule's part).
      const offered = new Set(calls.flatMap((c) => [c.name, toStorableText(c.name.slice(0, 200)) || 'unnamed']));
      const core = admitCalls(calls, new Set(earlier), offered);
      const runner = new RunCallIds(history).admit(calls, 1, 1);
      expect(runner.map((c) => [c.id, c.name, c.refused])).toEqual(core.calls.map((c) => [c.id, c.name, core.refused.get(c.id)]));
    }
  });
});

describe('TurnWriter, call arguments the log cannot hold as they are', () => {
  const { session, logOf, messages } = runnerSessions(() => app, 'call-arguments');

  /** Serves session `s`'s input as a runner whose model answered `calls` (each found), then "done". */
  async function answerWithCalls(s: { id: string; pool: string }, calls: Array<{ id: string; name: string; arguments: string }>) {
    const runner = new ForklineRunner({ url: app.url, pool: s.pool });
    try {
      const served = await runner.serve(s.id, async (claimed) => {
        await claimed.declareTools([{ name: 'lookup', effect: 'read-only' }]);
        const turn = claimed.turn(await claimed.modelRequest());
        await turn.startStep();
        await turn.message({ text: '', toolCalls: calls });
        for (const c of calls) await turn.result(c, 'ok', 'found');
        await turn.startStep();
        await turn.message({ text: 'done', toolCalls: [] });
        await turn.end('completed');
      });
      expect(served).toBe(true);
    } finally {
      await runner.close();
    }
  }

  it("stores them as forkline's own agent does, and the turn goes on", async () => {
    const s = await session('look up');
    const calls = HOSTILE.map((args, i) => ({ id: `c${i}`, name: 'lookup', arguments: args }));
    await answerWithCalls(s, calls);

    const log = await logOf(s.id);
    expect(messages(log)[0].toolCalls.map((c: { arguments: string }) => c.arguments)).toEqual(HOSTILE.map(toStorableText));
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);

  it("stores the result of a call whose id is as long as the log's bound (its result id made to fit), and the turn goes on", async () => {
    const s = await session('look up with long ids');
    const calls = ['x'.repeat(200), `${'y'.repeat(199)}\ud83d\ude00`, 'z'.repeat(150)].map((id) => ({ id, name: 'lookup', arguments: '{}' }));
    await answerWithCalls(s, calls);

    const log = await logOf(s.id);
    const results = log.filter((e: { type: string }) => e.type === 'tool/result').map((e: { data: { callId: string; resultId: string } }) => e.data);
    expect(results.map((r: { callId: string }) => r.callId)).toEqual(calls.map((c) => c.id));
    expect(new Set(results.map((r: { resultId: string }) => r.resultId)).size).toBe(3);
    expect(log.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  }, 60_000);
});
