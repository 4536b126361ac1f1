// What one subscription event may make the server hold (docs/operations.md
// "Limits"): each event's payload is held to the response ceiling
// (FORKLINE_MAX_RESPONSE_BYTES) as a query's response is — over graphql-ws
// (direct delivery and executed selections) and SSE alike — and measured
// before it is built, so thirty aliases of a large event's `data` never
// become one string thirty times its size. The subscription ends with the
// refusal: no event is left out silently.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeSse, subscribeWs, type Recorded } from '../helpers/subscribe.ts';
import { jsonBytes } from '../../src/graphql/plugins/response-size.ts';

const MAX = 64 * 1024;
let app: TestApp;
let id: string;
/** Seq of the message with the 20 KiB text. */
let bigSeq: number;

beforeAll(async () => {
  app = await startTestApp({ security: { maxResponseBytes: MAX } });
  id = (await app.ok('mutation { createSession(input: { title: "big events" }) { id } }')).createSession.id;
  const sent = await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { event { seq } } }', {
    i: { sessionId: id, text: 'x'.repeat(20 * 1024) },
  });
  bigSeq = sent.sendMessage.event.seq;
});
afterAll(() => app?.close());

/** `n` aliases of the event's data: n × 20 KiB for the message. */
const aliased = (n: number, extra = '') =>
  `subscription($id: ID!) { sessionEvents(sessionId: $id, afterSeq: -1) { seq ${Array.from({ length: n }, (_, i) => `d${i}: data`).join(' ')} ${extra} } }`;

const SUBSCRIBE = { ws: subscribeWs, sse: subscribeSse } as const;

async function ended(rec: Recorded): Promise<void> {
  await expect.poll(() => rec.errors.length > 0 || rec.completed, { timeout: 15_000 }).toBe(true);
}

describe('a subscription event over the response ceiling', () => {
  it.each([
    ['ws', 'direct delivery', ''],
    ['ws', 'an executed selection', '... on Event @include(if: true) { type }'],
    ['sse', 'an executed selection', ''],
  ] as const)('over %s (%s): the events before it, then RESPONSE_TOO_LARGE, then the end', async (transport, _how, extra) => {
    const framesBefore = app.server.wsDelivery.counts.frames;
    const rec = SUBSCRIBE[transport](app.url, aliased(10, extra), { id });
    await ended(rec);
    expect(rec.items.map((i) => i.sessionEvents.seq)).toEqual(Array.from({ length: bigSeq }, (_, seq) => seq));
    const [errors] = rec.errors as Array<Array<{ message: string; extensions: Record<string, unknown> }>>;
    expect(errors[0].extensions).toEqual({ code: 'RESPONSE_TOO_LARGE' });
    expect(errors[0].message).toMatch(new RegExp(`over the limit of ${MAX} \\(FORKLINE_MAX_RESPONSE_BYTES\\)`));
    await expect.poll(() => rec.completed, { timeout: 15_000 }).toBe(true);
    if (transport === 'ws' && !extra) expect(app.server.wsDelivery.counts.frames).toBeGreaterThan(framesBefore); // the direct writer sent it
    await rec.close();
  });

  it('under the ceiling the same event is delivered (two aliases of its data)', async () => {
    for (const subscribe of Object.values(SUBSCRIBE)) {
      const rec = subscribe(app.url, aliased(2), { id });
      const items = await rec.until((i) => i.some((x) => x.sessionEvents.seq === bigSeq));
      expect(items.find((x) => x.sessionEvents.seq === bigSeq).sessionEvents.d1.text).toHaveLength(20 * 1024);
      await rec.close();
    }
  });

  it('payloads kept for subscribers to share are bounded in bytes, not only in number', async () => {
    const { id: many } = (await app.ok('mutation { createSession(input: { title: "many" }) { id } }')).createSession;
    // 40 inputs of 50 KB each: 2 MB of payloads, each under the ceiling, together over what is kept (16 × 64 KiB).
    for (let i = 0; i < 40; i++)
      await app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: many, text: 'y'.repeat(50_000) } });
    const rec = subscribeWs(app.url, `subscription($id: ID!) { sessionEvents(sessionId: $id, afterSeq: -1) { seq data } }`, { id: many });
    await rec.until((i) => i.length >= 41);
    expect(app.server.wsDelivery.keptBytes()).toBeLessThanOrEqual(16 * MAX);
    expect(app.server.wsDelivery.keptBytes()).toBeGreaterThan(0);
    await rec.close();
  });
});

describe('jsonBytes', () => {
  it.each([
    ['plain', { a: 1, b: 'two', c: [true, false, null], d: { e: -1.5e-7 } }],
    ['escapes', { s: 'quote " backslash \\ newline \n tab \t bell \u0007 vt \u000b nul \u0000 del \u007f' }],
    ['non-ASCII', { s: 'é ü 中文 😀', ключ: 'значение' }],
    ['empty', { a: [], b: {}, c: '' }],
    ['undefined members', { a: undefined, b: 1, c: [undefined, 2] }],
    ['a string alone', 'x'.repeat(1000)],
  ])('%s: the UTF-8 length of JSON.stringify', (_name, value) => {
    expect(jsonBytes(value)).toBe(Buffer.byteLength(JSON.stringify(value)));
  });

  it('measures a value repeated under many keys once, and counts it each time', () => {
    const data = { text: 'z'.repeat(100_000) };
    const result = { data: Object.fromEntries(Array.from({ length: 30 }, (_, i) => [`a${i}`, data])) };
    expect(jsonBytes(result)).toBe(Buffer.byteLength(JSON.stringify(result)));
  });
});
