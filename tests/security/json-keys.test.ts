// Distinct object keys at every door (core/storable.ts MAX_JSON_KEYS,
// docs/operations.md "Event-loop time"): JSON.parse pays for each new key, and
// a GraphQL body, a graphql-ws message or a recording line holds keys its
// writer chose. Each hostile text goes through the real server; JSON.parse's
// calls on it are counted (a text past the bound is never parsed) while
// another client's small requests go on.
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { WebSocket } from 'ws';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { WAIT_BOUND_MS, servedMeanwhile } from '../helpers/event-loop.ts';
import { MAX_JSON_KEYS } from '../../src/core/storable.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

const TOO_MANY = `holds more than ${MAX_JSON_KEYS} distinct object keys`;
/** An object of `n` distinct short keys (base 36: a graphql-ws message of them stays within its 1 MiB). */
const distinctKeys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [i.toString(36), 0]));
const APPEND = 'mutation($i: AppendEventsInput!) { appendEvents(input: $i) { __typename } }';
const appendBody = (data: unknown) =>
  JSON.stringify({ query: APPEND, variables: { i: { sessionId: 'ses_none', expectedEventCount: 0, leaseToken: 1, events: [{ type: 'plugin/x/y', data }] } } });
const recording = (id: string, data: unknown) =>
  [
    { format: 'forkline.recording', version: 4, session: { id, title: 'keys' } },
    { seq: 0, type: 'plugin/x/y', data },
  ]
    .map((l) => JSON.stringify(l))
    .join('\n') + '\n';
const upload = (text: string) => fetch(new URL('/recordings', app.url), { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: text });

/** `work`'s result while another client is served, and how many times JSON.parse was given a text of `length` characters or more. */
async function parsedMeanwhile<T>(length: number, work: () => Promise<T>) {
  const parse = vi.spyOn(JSON, 'parse');
  try {
    const served = await servedMeanwhile(app.url, work);
    return { ...served, parsed: parse.mock.calls.filter(([text]) => typeof text === 'string' && text.length >= length).length };
  } finally {
    parse.mockRestore();
  }
}

describe('distinct object keys past MAX_JSON_KEYS', () => {
  it('an appendEvents body of 300,000 distinct keys (3 MB) is refused with 413 before it is parsed (before: parsed and run, the loop held 0.4-0.7 s)', async () => {
    const body = appendBody(distinctKeys(300_000));
    const { result, parsed, waitedMs } = await parsedMeanwhile(body.length / 2, async () => {
      const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      return { status: res.status, text: await res.text() };
    });
    expect(result.status).toBe(413); // before: 200 (the resolver's "session not found")
    expect(JSON.parse(result.text)).toEqual({
      errors: [{ message: `the request body ${TOO_MANY}: send fewer events or values per request`, extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' } }],
    });
    expect(parsed).toBe(0); // before: twice (the fast lane and yoga)
    expect(waitedMs).toBeLessThan(WAIT_BOUND_MS);
  });

  it('a recording line of 300,000 distinct keys is refused with 413 before it is parsed (before: imported, the loop held 0.9 s)', async () => {
    const text = recording('ses_keys_many', distinctKeys(300_000));
    const { result, parsed } = await parsedMeanwhile(text.length / 2, async () => {
      const res = await upload(text);
      return { status: res.status, body: (await res.json()) as { errors: Array<{ message: string }> } };
    });
    expect(result.status).toBe(413); // before: 201
    expect(result.body.errors[0].message).toBe(`line 2: size: ${TOO_MANY}`);
    expect(parsed).toBe(0);
  });

  it('a graphql-ws message of 100,001 distinct keys (within its 1 MiB) closes its socket with 4400 before it is parsed (before: parsed and run)', async () => {
    const ws = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ type: 'connection_init' }));
    await new Promise((r) => ws.once('message', r)); // connection_ack
    const message = JSON.stringify({
      id: '1',
      type: 'subscribe',
      payload: { query: 'query($v: JSON) { __typename }', variables: { v: distinctKeys(MAX_JSON_KEYS + 1) } },
    });
    expect(message.length).toBeLessThan(1024 * 1024);
    const { result, parsed } = await parsedMeanwhile(message.length / 2, async () => {
      const answer = new Promise<{ code?: number; reason?: string; message?: string }>((resolve) => {
        ws.once('close', (code, reason) => resolve({ code, reason: String(reason) }));
        ws.once('message', (data) => resolve({ message: String(data) }));
      });
      ws.send(message);
      return answer;
    });
    ws.terminate();
    expect(result).toEqual({ code: 4400, reason: `a message ${TOO_MANY}` }); // before: the query's answer
    expect(parsed).toBe(0);
  });
});

describe('within MAX_JSON_KEYS', () => {
  it('a recording line of real events and a tool output of 90,000 distinct keys is imported whole', async () => {
    const data = { toolCallId: 'call_1', toolName: 'list_files', output: distinctKeys(90_000), isError: false };
    const res = await upload(recording('ses_keys_within', data));
    expect(res.status).toBe(201);
    const { id } = ((await res.json()) as { session: { id: string } }).session;
    const [event] = await app.services.store.log.page(id, -1, 1);
    expect(Object.keys((event.data as { output: object }).output)).toHaveLength(90_000);
  });

  it('an appendEvents body of 90,000 distinct keys reaches the resolver', async () => {
    const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: appendBody(distinctKeys(90_000)) });
    const body = (await res.json()) as { errors: Array<{ path?: string[]; extensions: { code: string } }> };
    expect(body.errors[0].path).toEqual(['appendEvents']); // the resolver's answer (no such session), not the door's
  });
});
