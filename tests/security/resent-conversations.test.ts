// The conversation a chat client resends with every request (docs/operations.md
// "Event-loop time", core/resent-conversation.ts): /chat and /agui hold a
// body's JSON values to FORKLINE_MAX_REQUEST_VALUES before it is parsed,
// count each of a request's lists, refuse more than
// FORKLINE_MAX_REQUEST_MESSAGES entries in one with a 413 naming it, and parse
// only the messages they use. Each hostile body is sent through the real server
// while another client's small requests (GET /healthz) go on: the longest of
// them is what that client waited; and JSON.parse's calls are counted (the
// work the loop waited for: a body past the bound is never parsed).
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { WAIT_BOUND_MS, servedMeanwhile } from '../helpers/event-loop.ts';
import {
  DEFAULT_MAX_REQUEST_KEYS,
  DEFAULT_MAX_REQUEST_MESSAGES,
  DEFAULT_MAX_REQUEST_VALUES,
  MAX_MESSAGE_PARTS,
  tooManyEntries,
  tooManyMessages,
} from '../../src/core/resent-conversation.ts';
import { loadConfig, securityOptions } from '../../src/config.ts';
import type { SecurityOptions } from '../../src/http/security.ts';
import { JSON_ENVELOPE_VALUES, MAX_JSON_TEXT_DEPTH, jsonTextPast } from '../../src/core/storable.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

const urlOf = (path: string) => app.url.replace(/\/graphql$/, path);
async function post(path: string, body: string) {
  const res = await fetch(urlOf(path), { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body });
  return { status: res.status, text: await res.text() };
}
const errorOf = (text: string) => (JSON.parse(text) as { errors: Array<{ message: string; extensions: { code: string } }> }).errors[0];
/** The 413 of a body past the JSON values a chat door's body may hold. */
const tooManyValues = (max: number) => ({
  message:
    `the request body holds more than ${max} JSON values (strings, numbers, objects, arrays: each counts), ` +
    'past FORKLINE_MAX_REQUEST_VALUES: the session keeps the conversation, so send only its last message',
  extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' },
});
/** The 413 of a body past the distinct object keys a chat door's body may hold. */
const tooManyKeys = (max: number) => ({
  message:
    `the request body holds more than ${max} distinct object keys, ` +
    'past FORKLINE_MAX_REQUEST_KEYS: the session keeps the conversation, so send only its last message',
  extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' },
});
/** An object of `n` distinct keys: JSON.parse pays most for each new one. */
const distinctKeys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`key-${i}`, 0]));
/** `work`'s result, and how many times JSON.parse was given a text of `length` characters or more meanwhile. */
async function parsedMeanwhile<T>(length: number, work: () => Promise<T>): Promise<{ result: T; parsed: number }> {
  const parse = vi.spyOn(JSON, 'parse');
  try {
    const result = await work();
    return { result, parsed: parse.mock.calls.filter(([text]) => typeof text === 'string' && text.length >= length).length };
  } finally {
    parse.mockRestore();
  }
}
/**
 * Sends a body past the JSON a chat door's body may hold while another client is served: the 413 naming the bound
 * (`refusal`: the values'), the body never given to JSON.parse (before: once each), and what the other client waited.
 */
async function refusedUnparsed(path: string, body: string, refusal = tooManyValues(DEFAULT_MAX_REQUEST_VALUES)) {
  const { result, parsed } = await parsedMeanwhile(body.length, () => servedMeanwhile(app.url, () => post(path, body)));
  expect(result.result.status).toBe(413);
  expect(errorOf(result.result.text)).toEqual(refusal);
  expect(parsed).toBe(0);
  expect(result.waitedMs).toBeLessThan(WAIT_BOUND_MS);
}
/** About `bytes` of JSON arrays nested `depth` deep, side by side: what JSON.parse pays most for (one per bracket pair). */
const nestedArrays = (bytes: number, depth: number) => {
  const one = '['.repeat(depth) + ']'.repeat(depth);
  return JSON.parse(
    `[${Array(Math.floor(bytes / (one.length + 1)))
      .fill(one)
      .join(',')}]`,
  ) as unknown[];
};
/** The SSE `data:` payloads of an answer. */
const chunksOf = (text: string) => [...text.matchAll(/^data: (\{.*\})$/gm)].map((m) => JSON.parse(m[1]) as Record<string, unknown>);

describe('POST /chat', () => {
  let chats = 0;
  const chat = (messages: unknown[]) => JSON.stringify({ id: `resent-${++chats}`, messages, trigger: 'submit-message' });
  const last = { id: 'last', role: 'user', parts: [{ type: 'text', text: 'hi' }] };
  const history = (n: number) =>
    Array.from({ length: n }, (_, i) =>
      i % 2
        ? { id: `a${i}`, role: 'assistant', parts: [{ type: 'step-start' }, { type: 'text', text: 'Echo: hello there', state: 'done' }] }
        : { id: `u${i}`, role: 'user', parts: [{ type: 'text', text: 'hello there' }] },
    );
  const answerText = (text: string) =>
    chunksOf(text)
      .filter((c) => c.type === 'text-delta')
      .map((c) => c.delta)
      .join('');

  it('100,000 messages (9.6 MiB) are refused with a 413 naming the limit, unparsed (before: each parsed and checked, then answered; the loop held 0.5-1.5 s)', async () => {
    const body = chat([...history(99_999), last]);
    await refusedUnparsed('/chat', body); // before: 413 too, once the whole body was parsed (the loop held 1.9 s)
  });

  it("1.4 MB of arrays nested 240 deep, within every door's bounds of values and depth, in a message it does not use: 413 naming the bound, unparsed (before: parsed, the loop held 0.65-0.8 s, and answered)", async () => {
    const body = chat([{ ...history(1)[0], metadata: nestedArrays(1.4e6, 240) }, last]);
    await refusedUnparsed('/chat', body); // before: 200 after the loop held 0.3 s here (0.65-0.8 s measured before)
  });

  it('200,000 distinct keys (3.4 MB) in a message it does not use, within its values: 413 naming the bound, unparsed (before: parsed, the loop held 0.5-1 s, and answered)', async () => {
    const body = chat([{ ...history(1)[0], metadata: distinctKeys(200_000) }, last]);
    await refusedUnparsed('/chat', body, tooManyKeys(DEFAULT_MAX_REQUEST_KEYS)); // before: 200 after the loop held 0.5-1 s
  });

  it('messages it does not use are not read: 9,999 malformed ones before the last user message, one of 20,000 parts (before: 400, an error listing each, 870 KB)', async () => {
    const malformed = Array.from({ length: DEFAULT_MAX_REQUEST_MESSAGES - 2 }, (_, i) => ({ id: `m${i}`, role: 'robot', parts: 'none' }));
    const wide = { id: 'wide', role: 'assistant', parts: Array.from({ length: 2 * MAX_MESSAGE_PARTS }, () => ({ type: 'text', text: 'x' })) };
    const body = chat([...malformed, wide, last]);
    const { result, waitedMs } = await servedMeanwhile(app.url, () => post('/chat', body));
    expect(result.status).toBe(200); // before: 400
    expect(answerText(result.text)).toBe('Echo: hi');
    expect(chunksOf(result.text).at(-1)).toMatchObject({ type: 'finish', finishReason: 'stop' });
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
  });

  it('the messages it uses are parsed whole: their parts within the bound, each checked, errors naming the message', async () => {
    const wide = { id: 'last', role: 'user', parts: Array.from({ length: MAX_MESSAGE_PARTS + 1 }, () => ({ type: 'text', text: 'x' })) };
    const tooWide = await post('/chat', chat([...history(3), wide]));
    expect(tooWide.status).toBe(400);
    expect(errorOf(tooWide.text).message).toBe(`messages.3.parts: Too big: expected array to have <=${MAX_MESSAGE_PARTS} items`);
    const badPart = await post('/chat', chat([...history(2), { id: 'last', role: 'user', parts: [{ type: 'text', text: 7 }] }]));
    expect(errorOf(badPart.text).message).toBe('messages.2.parts.0.text: Invalid input: expected string, received number');
    // The message an approval continues (the last) is used too.
    const approval = { type: 'tool-x', state: 'approval-responded', approval: { id: 'call-1', approved: 'yes' } };
    const badApproval = await post('/chat', chat([last, { id: 'a', role: 'assistant', parts: [approval] }]));
    expect(errorOf(badApproval.text).message).toBe('messages.1.parts.0.approval.approved: Invalid input: expected boolean, received string');
  });
});

describe('POST /agui', () => {
  let runs = 0;
  const run = (over: Record<string, unknown>) =>
    JSON.stringify({
      threadId: 'new',
      runId: `resent-${++runs}`,
      state: {},
      tools: [],
      context: [],
      forwardedProps: {},
      messages: [{ id: 'last', role: 'user', content: 'hi' }],
      ...over,
    });
  const history = (n: number) =>
    Array.from({ length: n }, (_, i) =>
      i % 2 ? { id: `a${i}`, role: 'assistant', content: 'Echo: hello there' } : { id: `u${i}`, role: 'user', content: 'hello there' },
    );

  it('100,000 messages (5.7 MiB) are refused with a 413 naming the limit, unparsed (before: each parsed, then run; the loop held 0.6 s)', async () => {
    const body = run({ messages: [...history(99_999), { id: 'last', role: 'user', content: 'hi' }] });
    await refusedUnparsed('/agui', body); // before: 413 too, once the whole body was parsed (the loop held 0.27 s)
  });

  it('800,000 short strings (15 MB) in forwardedProps, which it ignores: 413 naming the bound, unparsed (before: parsed, and run)', async () => {
    const body = run({ forwardedProps: { notes: Array(800_000).fill('abcdefghijklmnop') } });
    await refusedUnparsed('/agui', body); // before: 200 after the loop held 1.1 s
  });

  it('200,000 distinct keys (3.4 MB) in the state, which it ignores: 413 naming the bound, unparsed (before: parsed, and run)', async () => {
    await refusedUnparsed('/agui', run({ state: distinctKeys(200_000) }), tooManyKeys(DEFAULT_MAX_REQUEST_KEYS)); // before: 200 after the loop held {AGUI_KEYS}
  });

  it('client tools and context, which it ignores, are counted, not walked: 10,000 of each, malformed, and the run is answered; 100,000 are the 413 naming the list', async () => {
    const body = (n: number) =>
      run({ tools: Array(n).fill('not a tool'), context: Array(n).fill(0), messages: [...history(2), { id: 'last', role: 'user', content: 'hi' }] });
    const answered = await post('/agui', body(DEFAULT_MAX_REQUEST_MESSAGES));
    expect(answered.status).toBe(200); // before: 400 after parsing each
    const events = chunksOf(answered.text);
    expect(events.at(-1)).toMatchObject({ type: 'RUN_FINISHED' });
    expect(events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta)).toEqual(['Echo: hi']);

    const { result, waitedMs } = await servedMeanwhile(app.url, () => post('/agui', body(100_000)));
    expect(result.status).toBe(413); // before: 200, whatever their number
    expect(errorOf(result.text)).toEqual({
      message: tooManyEntries('tools', 100_000, DEFAULT_MAX_REQUEST_MESSAGES),
      extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' },
    });
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
  });

  it('resume entries are counted before any is parsed: 100,000 malformed ones are the 413 naming the list (before: 400 listing each of them, 6.3 MB, the loop held 1.2 s)', async () => {
    const body = run({ resume: Array(100_000).fill('not an entry') });
    const { result, waitedMs } = await servedMeanwhile(app.url, () => post('/agui', body));
    expect(result.status).toBe(413); // before: 400
    expect(errorOf(result.text)).toEqual({
      message: tooManyEntries('resume', 100_000, DEFAULT_MAX_REQUEST_MESSAGES),
      extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' },
    });
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
  });

  it("the last user message's content parts past the bound are refused before any is parsed (before: 100,000 parsed, joined and sent: its turn held the loop for seconds; 100,000 are now past the body's values)", async () => {
    const body = run({ messages: [{ id: 'last', role: 'user', content: Array.from({ length: 2 * MAX_MESSAGE_PARTS }, () => ({ type: 'text', text: 'x' })) }] });
    const { result, waitedMs } = await servedMeanwhile(app.url, () => post('/agui', body));
    expect(result.status).toBe(400); // before: 200, and a 199,999-character message sent
    expect(errorOf(result.text)).toEqual({
      message: `not an AG-UI RunAgentInput: messages.0.content: Too big: expected array to have <=${MAX_MESSAGE_PARTS} items`,
      extensions: { code: 'BAD_USER_INPUT' },
    });
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
  });

  it('messages it does not use are not read; the one it uses is, whole', async () => {
    const malformed = [{ id: 7, role: 'nobody' }, 'not a message', { id: 'x'.repeat(500), role: 'user', content: 'an earlier input' }];
    const answered = await post('/agui', run({ messages: [...malformed, { id: 'last', role: 'user', content: 'hi' }] }));
    expect(answered.status).toBe(200); // before: 400
    expect(chunksOf(answered.text).at(-1)).toMatchObject({ type: 'RUN_FINISHED' });
    const badPart = await post('/agui', run({ messages: [...history(2), { id: 'last', role: 'user', content: [{ type: 'text', text: 1 }] }] }));
    expect(errorOf(badPart.text).message).toBe('not an AG-UI RunAgentInput: messages.2.content.0.text: Invalid input: expected string, received number');
  });
});

/** A server under `security`'s limits: each door's request `past` them is the 413 with `message`, and `within` is answered. */
async function limitAtDoors(security: SecurityOptions, message: string, requests: Array<[path: string, past: unknown, within: unknown]>) {
  const small = await startTestApp({ security });
  try {
    const at = (path: string, body: unknown) =>
      fetch(small.url.replace(/\/graphql$/, path), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    for (const [path, past, within] of requests) {
      const refused = await at(path, past);
      expect(refused.status, path).toBe(413);
      expect(errorOf(await refused.text()).message, path).toBe(message);
      const answered = await at(path, within);
      expect(answered.status, path).toBe(200);
      await answered.text();
    }
  } finally {
    await small.close();
  }
}

describe('FORKLINE_MAX_REQUEST_MESSAGES', () => {
  it('sets the limit at both doors: with 3, four messages are the 413 naming it and three are answered', async () => {
    expect(() => loadConfig({ FORKLINE_MAX_REQUEST_MESSAGES: '0' })).toThrow(/FORKLINE_MAX_REQUEST_MESSAGES/);
    const chat = (n: number) => ({
      id: `small-${n}`,
      messages: Array.from({ length: n }, (_, i) => ({ id: `m${i}`, role: 'user', parts: [{ type: 'text', text: 'hi' }] })),
    });
    const agui = (n: number) => ({
      threadId: 'new',
      runId: `small-${n}`,
      messages: Array.from({ length: n }, (_, i) => ({ id: `m${i}`, role: 'user', content: 'hi' })),
    });
    await limitAtDoors(securityOptions(loadConfig({ FORKLINE_MAX_REQUEST_MESSAGES: '3' })), tooManyMessages(4, 3), [
      ['/chat', chat(4), chat(3)],
      ['/agui', agui(4), agui(3)],
    ]);
  });
});

describe('FORKLINE_MAX_REQUEST_VALUES', () => {
  it("sets the bound at both doors: with 100, a body one value past it (and a request's envelope) is the 413 naming it, one at it answered", async () => {
    expect(() => loadConfig({ FORKLINE_MAX_REQUEST_VALUES: '99' })).toThrow(/FORKLINE_MAX_REQUEST_VALUES/);
    // A request, then `n` zeros beside it.
    const zeros = (n: number) => Array<number>(n).fill(0);
    const chat = (n: number) => ({ id: `values-${n}`, messages: [{ id: 'm', role: 'user', parts: [{ type: 'text', text: 'hi' }] }], fill: zeros(n) });
    const agui = (n: number) => ({ threadId: 'new', runId: `values-${n}`, messages: [{ id: 'm', role: 'user', content: 'hi' }], forwardedProps: zeros(n) });
    // The most zeros within 100 values and a request's envelope, as the scan the doors run counts them.
    const within = (body: (n: number) => unknown) => {
      let n = 0;
      while (jsonTextPast(JSON.stringify(body(n + 1)), 100 + JSON_ENVELOPE_VALUES, MAX_JSON_TEXT_DEPTH) === undefined) n++;
      return n;
    };
    await limitAtDoors(securityOptions(loadConfig({ FORKLINE_MAX_REQUEST_VALUES: '100' })), tooManyValues(100).message, [
      ['/chat', chat(within(chat) + 1), chat(within(chat))],
      ['/agui', agui(within(agui) + 1), agui(within(agui))],
    ]);
  });
});

describe('FORKLINE_MAX_REQUEST_KEYS', () => {
  it('sets the bound at both doors: with 100, a body of 101 distinct keys is the 413 naming it, one of 100 (each met many times) answered', async () => {
    expect(() => loadConfig({ FORKLINE_MAX_REQUEST_KEYS: '99' })).toThrow(/FORKLINE_MAX_REQUEST_KEYS/);
    // A request's own keys, then `n` more of its own: at 100 in all, and many times each.
    const chat = (n: number) => ({
      id: `keys-${n}`,
      messages: [{ id: 'm', role: 'user', parts: [{ type: 'text', text: 'hi' }] }],
      fill: [distinctKeys(n), distinctKeys(n)],
    });
    const agui = (n: number) => ({
      threadId: 'new',
      runId: `keys-${n}`,
      messages: [{ id: 'm', role: 'user', content: 'hi' }],
      state: [distinctKeys(n), distinctKeys(n)],
    });
    await limitAtDoors(securityOptions(loadConfig({ FORKLINE_MAX_REQUEST_KEYS: '100' })), tooManyKeys(100).message, [
      // /chat's own: id, messages, role, parts, type, text, fill; /agui's: threadId, runId, messages, id, role, content, state.
      ['/chat', chat(100 - 7 + 1), chat(100 - 7)],
      ['/agui', agui(100 - 7 + 1), agui(100 - 7)],
    ]);
  });
});
