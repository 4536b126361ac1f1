// The conversation a chat client resends with every request (docs/operations.md
// "Event-loop time", core/resent-conversation.ts): /chat and /agui count a
// request's messages, refuse more than FORKLINE_MAX_REQUEST_MESSAGES with a 413
// naming it, and parse only the messages they use. Each hostile body is sent
// through the real server while another client's small requests (GET /healthz)
// go on: the longest of them is what that client waited.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { WAIT_BOUND_MS, servedMeanwhile } from '../helpers/event-loop.ts';
import { DEFAULT_MAX_REQUEST_MESSAGES, MAX_MESSAGE_PARTS, tooManyMessages } from '../../src/core/resent-conversation.ts';
import { loadConfig, securityOptions } from '../../src/config.ts';

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

  it('100,000 messages (9.6 MiB) are refused with a 413 naming the limit (before: each parsed and checked, then answered; the loop held 0.5-1.5 s)', async () => {
    const body = chat([...history(99_999), last]);
    const { result, waitedMs } = await servedMeanwhile(app.url, () => post('/chat', body));
    expect(result.status).toBe(413); // before: 200
    expect(errorOf(result.text)).toEqual({
      message: tooManyMessages(100_000, DEFAULT_MAX_REQUEST_MESSAGES),
      extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' },
    });
    // Before: 1.2-1.5 s on a loaded machine, and so now (the 9.6 MiB body is parsed): the 413 tells the old code apart.
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
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

  it('100,000 messages (5.7 MiB) are refused with a 413 naming the limit (before: each parsed, then run; the loop held 0.6 s)', async () => {
    const body = run({ messages: [...history(99_999), { id: 'last', role: 'user', content: 'hi' }] });
    const { result, waitedMs } = await servedMeanwhile(app.url, () => post('/agui', body));
    expect(result.status).toBe(413); // before: 200
    expect(errorOf(result.text)).toEqual({
      message: tooManyMessages(100_000, DEFAULT_MAX_REQUEST_MESSAGES),
      extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' },
    });
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
  });

  it('client tools and context, which it ignores, are not walked: 100,000 of each, malformed, and the run is answered (before: 400 after parsing each; the loop held 0.7-1.5 s)', async () => {
    const body = run({
      tools: Array(100_000).fill('not a tool'),
      context: Array(100_000).fill(0),
      messages: [...history(2), { id: 'last', role: 'user', content: 'hi' }],
    });
    const { result, waitedMs } = await servedMeanwhile(app.url, () => post('/agui', body));
    expect(result.status).toBe(200); // before: 400
    const events = chunksOf(result.text);
    expect(events.at(-1)).toMatchObject({ type: 'RUN_FINISHED' });
    expect(events.filter((e) => e.type === 'TEXT_MESSAGE_CONTENT').map((e) => e.delta)).toEqual(['Echo: hi']);
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
  });

  it("the last user message's content parts past the bound are refused before any is parsed (before: 100,000 parsed, joined and sent: its turn held the loop for seconds)", async () => {
    const body = run({ messages: [{ id: 'last', role: 'user', content: Array.from({ length: 100_000 }, () => ({ type: 'text', text: 'x' })) }] });
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

describe('FORKLINE_MAX_REQUEST_MESSAGES', () => {
  it('sets the limit at both doors: with 3, four messages are the 413 naming it and three are answered', async () => {
    expect(() => loadConfig({ FORKLINE_MAX_REQUEST_MESSAGES: '0' })).toThrow(/FORKLINE_MAX_REQUEST_MESSAGES/);
    const { maxRequestMessages } = securityOptions(loadConfig({ FORKLINE_MAX_REQUEST_MESSAGES: '3' }));
    const small = await startTestApp({ security: { maxRequestMessages } });
    try {
      const at = (path: string, body: unknown) =>
        fetch(small.url.replace(/\/graphql$/, path), { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
      const chat = (n: number) => ({
        id: `small-${n}`,
        messages: Array.from({ length: n }, (_, i) => ({ id: `m${i}`, role: 'user', parts: [{ type: 'text', text: 'hi' }] })),
      });
      const agui = (n: number) => ({
        threadId: 'new',
        runId: `small-${n}`,
        messages: Array.from({ length: n }, (_, i) => ({ id: `m${i}`, role: 'user', content: 'hi' })),
      });
      for (const [path, body] of [
        ['/chat', chat],
        ['/agui', agui],
      ] as const) {
        const refused = await at(path, body(4));
        expect(refused.status, path).toBe(413);
        expect(errorOf(await refused.text()).message).toBe(tooManyMessages(4, 3));
        const answered = await at(path, body(3));
        expect(answered.status, path).toBe(200);
        await answered.text();
      }
    } finally {
      await small.close();
    }
  });
});
