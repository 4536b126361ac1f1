// What one request can make the process spend in one stretch of synchronous
// work (docs/operations.md "Memory and time", "Event-loop time"): the other
// bounds cap rows and bytes, these cap the time spent on the bytes allowed.
// Each case runs through the real HTTP server, in this process, and measures
// the longest stall of the event loop (every other request of the process
// waits that long) while the hostile request is served. A stall counts the
// time this process waited for a CPU too: its bounds allow several times what
// a loaded 2-core machine showed (the whole suite beside it), and where that
// is not below the old code's figure, what tells the old code apart is
// counted (its CPU time, the answer it gave), not timed.
//
// - A regular expression that backtracks over a run of whitespace scans the
//   rest of the run from every start inside it: a message of spaces made a
//   compaction's transcript (compactSession, or the automatic one before a
//   step) quadratic in the message, and an `If-None-Match` header of spaces
//   made `GET /sessions/<id>/events` quadratic in the header.
// - A provider's error body (up to 64 KiB) was searched with
//   /input token count.*exceeds the maximum/, which rescans the rest of the
//   body from each occurrence of its first words.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { agentTurns } from '../helpers/agent-turns.ts';
import { spent } from '../helpers/event-loop.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { WebSocket } from 'ws';
import { MAX_JSON_TEXT_DEPTH, MAX_JSON_VALUES, nestedTooDeep, tooManyValues } from '../../src/core/storable.ts';
import { MAX_VARIABLE_LIST_ITEMS, tooManyListItems } from '../../src/graphql/plugins/variable-shape.ts';

let app: TestApp;
let provider: http.Server;
/** What the provider answers every call: an error of the size the bounded fetch keeps (64 KiB). */
const OVERFLOW_WORDS = 'input token count ';
const errorBody = JSON.stringify({ error: { message: OVERFLOW_WORDS.repeat(Math.floor(65_000 / OVERFLOW_WORDS.length)), type: 'invalid_request_error' } });
const turns = agentTurns(() => app, 'loop time');

beforeAll(async () => {
  provider = http.createServer((req, res) => {
    req.resume();
    req.on('end', () => res.writeHead(400, { 'content-type': 'application/json' }).end(errorBody));
  });
  await new Promise<void>((r) => provider.listen(0, '127.0.0.1', r));
  const port = (provider.address() as AddressInfo).port;
  app = await startTestApp({ providers: { openaiCompatible: { baseUrl: `http://127.0.0.1:${port}/v1` } } });
});
afterAll(async () => {
  await app?.close();
  await new Promise((r) => provider?.close(r));
});

describe('regular expressions over text from outside', () => {
  it('a compaction of a message of 60,000 spaces holds the event loop briefly (before: seconds, quadratic in the run)', async () => {
    const id = await turns.create();
    await turns.turn(id, `a${' '.repeat(60_000)}b`);
    const { result, stallMs } = await spent(() =>
      app.gql(`mutation($i: CompactSessionInput!) { compactSession(input: $i) { summarySeq } }`, { i: { sessionId: id } }),
    );
    expect(result.errors).toBeUndefined();
    expect(result.data.compactSession.summarySeq).toBeGreaterThan(0);
    expect(stallMs).toBeLessThan(1000); // before: 11.5 s in one stretch
  });

  it('eight event pages with an If-None-Match header of 16,000 spaces are served briefly (before: about a second each)', async () => {
    const id = await turns.create();
    const url = new URL(`/sessions/${id}/events?after=-1&first=5`, app.url);
    const header = `"a"${' '.repeat(16_000)}"b"`; // within Node's 16 KiB of headers (it trims a value's ends, not its inside)
    const { result, stallMs, cpuMs } = await spent(async () => {
      const statuses: number[] = [];
      for (let i = 0; i < 8; i++) {
        const res = await fetch(url, { headers: { 'if-none-match': header } });
        await res.arrayBuffer();
        statuses.push(res.status);
      }
      return statuses;
    });
    expect(result).toEqual(Array(8).fill(200));
    expect(stallMs).toBeLessThan(1000); // before: 0.5-1 s per request, in one stretch each; loaded here: 60-100 ms
    expect(cpuMs).toBeLessThan(1000); // before: 2-8 s for the eight; loaded here: 40-65 ms
  });

  it("four providers' errors of 64 KiB naming the input token count over and over are read briefly (before: about a second each)", async () => {
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await turns.create({ provider: 'openai-compatible', model: 'fake' }));
    const { stallMs, cpuMs } = await spent(async () => {
      for (const id of ids) await turns.turn(id, 'hello');
    });
    for (const id of ids) {
      const [end] = await turns.tail(id, 1);
      expect(end[0]).toBe('turn/end');
      expect(JSON.stringify(await turns.tail(id, 3))).toContain('HTTP 400');
    }
    expect(stallMs).toBeLessThan(1000); // before: 0.5-1 s in one stretch per turn; loaded here: 40-110 ms
    expect(cpuMs).toBeLessThan(1000); // before: 1.7-4 s for the four turns; loaded here: 60-70 ms
  });
});

describe('JSON of many small values (MAX_JSON_VALUES)', () => {
  const HEADER = { format: 'forkline.recording', version: 4, session: { id: 'ses_wide', title: 'wide' } };
  const upload = (text: string) => fetch(new URL('/recordings', app.url), { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body: text });
  const recording = (values: number) =>
    [HEADER, { seq: 0, type: 'plugin/x/y', data: { a: new Array(values).fill(0) } }].map((l) => JSON.stringify(l)).join('\n') + '\n';

  it('a recording line of 7 million values (14 MB, within the line limit) is refused before it is parsed (before: imported, the loop held 7 s)', async () => {
    const text = recording(7_000_000);
    const { result, stallMs } = await spent(async () => {
      const res = await upload(text);
      return { status: res.status, body: (await res.json()) as { errors: Array<{ message: string }> } };
    });
    expect(result.status).toBe(413);
    expect(result.body.errors[0].message).toBe(`line 2: size: ${tooManyValues(MAX_JSON_VALUES)}`);
    expect(stallMs).toBeLessThan(3000); // before: 201, the loop held 7 s in one stretch; loaded here: 210-300 ms
  });

  it('a GraphQL body of 8 million values (16 MB, within the body limit) is refused before it is parsed (before: the loop held 11-13 s)', async () => {
    const body = JSON.stringify({ query: 'query($v: JSON) { __typename }', variables: { v: new Array(8_000_000).fill(0) } });
    const { result, stallMs } = await spent(async () => {
      const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      return { status: res.status, body: (await res.json()) as { errors: Array<{ message: string; extensions: { code: string } }> } };
    });
    expect(result.status).toBe(413);
    expect(result.body.errors[0].extensions.code).toBe('REQUEST_ENTITY_TOO_LARGE');
    expect(result.body.errors[0].message).toContain(tooManyValues(MAX_JSON_VALUES));
    expect(stallMs).toBeLessThan(4000); // before: 11-13 s in one stretch (two parses, then the collector); loaded here: 400 ms
  });

  it('a line just under the bound is imported whole', async () => {
    const res = await upload(recording(MAX_JSON_VALUES - 10));
    expect(res.status).toBe(201);
    const { id } = ((await res.json()) as { session: { id: string } }).session;
    const [event] = await app.services.store.log.page(id, -1, 1);
    expect((event.data as { a: unknown[] }).a).toHaveLength(MAX_JSON_VALUES - 10);
  });
});

describe('GraphQL variables coerced item by item (MAX_VARIABLE_LIST_ITEMS)', () => {
  const post = async (query: string, variables: Record<string, unknown>) => {
    const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
    return (await res.json()) as { errors?: Array<{ message: string; path?: string[]; extensions: { code: string } }> };
  };
  const APPEND = 'mutation($i: AppendEventsInput!) { appendEvents(input: $i) { __typename } }';
  const append = (events: number) => ({
    i: { sessionId: 'ses_none', expectedEventCount: 0, leaseToken: 1, events: Array.from({ length: events }, () => ({ type: 'a', data: 0 })) },
  });

  it('an append of 200,000 tiny events (4 MB) is refused before coercion (before: the loop held 1-3 s, then zod refused it)', async () => {
    const { result, stallMs } = await spent(() => post(APPEND, append(200_000)));
    // Loaded here: 0.7-0.75 s (the body's parse), near the old code's 1-3 s (coercion and its copy, 5-15 µs an item):
    // what tells the old code apart is its answer (zod's, after coercion), not the time.
    expect(stallMs).toBeLessThan(5000);
    expect(result.errors?.[0].message).toBe(tooManyListItems('$i.events'));
    expect(result.errors?.[0].extensions.code).toBe('BAD_USER_INPUT');
  });

  it('an input of 50,000 fields its type does not define is refused at the first (before: 51 printouts of the whole input, seconds)', async () => {
    const i = Object.fromEntries(Array.from({ length: 50_000 }, (_, k) => [`k${k}`, 1]));
    const { result, stallMs } = await spent(() => post('mutation($i: CreateSessionInput!) { createSession(input: $i) { __typename } }', { i }));
    expect(stallMs).toBeLessThan(3000); // before: 3-10 s in one stretch; loaded here: 260-280 ms
    expect(result.errors).toHaveLength(1); // before: 51
    expect(result.errors?.[0].message).toBe('variables: $i: field "k0" is not defined by type "CreateSessionInput"');
  });

  it('lists up to the bound reach the resolvers, whose own bounds answer', async () => {
    const atBound = await post(APPEND, append(MAX_VARIABLE_LIST_ITEMS));
    expect(atBound.errors?.[0].path).toEqual(['appendEvents']); // the resolver's answer (no such session), not the door's
    const tools = await post('mutation($i: CreateSessionInput!) { createSession(input: $i) { __typename } }', { i: { tools: Array(501).fill('t') } });
    expect(tools.errors?.[0].message).toBe('tools: Too big: expected array to have <=500 items');
  });
});

describe('deeply nested JSON (MAX_JSON_TEXT_DEPTH)', () => {
  const TOO_DEEP = nestedTooDeep(MAX_JSON_TEXT_DEPTH);
  const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
  // Variables no operation declares are parsed with the body and then left aside (graphql-js coerces the declared ones).
  const withVariable = (v: string) => `{"query":"{ __typename }","variables":{"v":${v}}}`;
  const post = async (body: string) => {
    const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    return { status: res.status, body: (await res.json()) as { data?: unknown; errors?: Array<{ message: string; extensions: { code: string } }> } };
  };

  it('a GraphQL body of 999,000 nested arrays (2 MB, within MAX_JSON_VALUES) is refused before it is parsed (before: parsed twice and answered, the loop held 0.9-1.4 s)', async () => {
    const body = withVariable(nested(999_000));
    const { result, stallMs, cpuMs } = await spent(() => post(body));
    expect(result.status).toBe(400);
    expect(result.body.errors?.[0]).toEqual({ message: `the request body ${TOO_DEEP}`, extensions: { code: 'BAD_USER_INPUT' } });
    expect(stallMs).toBeLessThan(300); // before: 0.9-1.4 s in one stretch (parsed by the fast lane and by yoga); loaded here: 0-20 ms
    expect(cpuMs).toBeLessThan(250); // before: 0.35-0.45 s with the variable undeclared, 0.7-0.9 s declared (walked); loaded here: 7-9 ms
  });

  it('a recording line nested a million deep is refused before it is parsed, saying why (before: parsed, then refused by the codec, the loop held 0.8-1.5 s)', async () => {
    const header = JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_deep', title: 'deep' } });
    const line = `{"seq":0,"type":"plugin/x/y","data":{"a":${nested(1_000_000)}}}`;
    const { result, stallMs } = await spent(async () => {
      const res = await fetch(new URL('/recordings', app.url), {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson' },
        body: `${header}\n${line}\n`,
      });
      return { status: res.status, body: (await res.json()) as { errors: Array<{ message: string }> } };
    });
    expect(result.status).toBe(400);
    expect(result.body.errors[0].message).toBe(`line 2: depth: ${TOO_DEEP}`);
    expect(stallMs).toBeLessThan(1000); // loaded here: 10-45 ms
  });

  it('a graphql-ws message nested half a million deep (1 MB) closes its socket with 4400 and says why (before: parsed and run, the loop held 0.45-0.6 s)', async () => {
    const ws = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ type: 'connection_init' }));
    await new Promise((r) => ws.once('message', r)); // connection_ack
    const { result, stallMs } = await spent(async () => {
      const outcome = new Promise((resolve) => {
        ws.once('close', (code, reason) => resolve({ code, reason: String(reason) }));
        ws.once('message', (data) => resolve({ message: String(data) }));
      });
      ws.send(`{"id":"1","type":"subscribe","payload":${withVariable(nested(500_000))}}`);
      return outcome;
    });
    expect(result).toEqual({ code: 4400, reason: `a message ${TOO_DEEP}` }); // before: parsed and run, answered
    expect(stallMs).toBeLessThan(1000); // loaded here: 25-60 ms
  });

  it('a body nested as deep as the bound is answered, over HTTP and graphql-ws', async () => {
    const deepest = nested(MAX_JSON_TEXT_DEPTH - 2); // the body's object and its variables are two levels
    expect(await post(withVariable(deepest))).toEqual({ status: 200, body: { data: { __typename: 'Query' } } });
    const refused = await post(withVariable(`[${deepest}]`));
    expect(refused.body.errors?.[0].message).toBe(`the request body ${TOO_DEEP}`);
    const ws = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    await new Promise((r) => ws.once('open', r));
    ws.send(JSON.stringify({ type: 'connection_init' }));
    await new Promise((r) => ws.once('message', r)); // connection_ack
    const answer = new Promise((resolve) => ws.once('message', (data) => resolve(JSON.parse(String(data)))));
    // The message's object and its payload are two levels more than a body's.
    ws.send(`{"id":"1","type":"subscribe","payload":${withVariable(nested(MAX_JSON_TEXT_DEPTH - 3))}}`);
    expect(await answer).toEqual({ id: '1', type: 'next', payload: { data: { __typename: 'Query' } } });
    ws.close();
  });
});

describe('introspection', () => {
  // Two levels of fields below every type, its interfaces, possible types and input fields: graphql-js's own
  // introspection depth rule allows this much, and the query cost does not count introspection.
  const nest = (k: number): string => (k === 0 ? 'name' : `fields { name type { name ofType { name ${nest(k - 1)} } } }`);
  const schemaRead = `types { ${nest(2)} interfaces { name ${nest(1)} } possibleTypes { name ${nest(1)} } inputFields { name type { name ofType { name ${nest(1)} } } } }`;
  const post = async (query: string) => {
    const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query }) });
    return { status: res.status, body: (await res.json()) as { data?: Record<string, unknown>; errors?: Array<{ message: string }> } };
  };

  it('30 aliases of the whole schema are refused before they run (before: 3.4 MB built, the loop held 1-4 s)', async () => {
    const aliases = Array.from({ length: 30 }, (_, i) => `s${i}: __schema { ...S }`).join(' ');
    const { result, stallMs } = await spent(() => post(`{ ${aliases} } fragment S on __Schema { ${schemaRead} }`));
    expect(result.body.errors?.[0].message).toBe(
      'Query.__schema may be read at most once per operation, and this one reads it up to 30 times (it is the same each time)',
    );
    expect(stallMs).toBeLessThan(1000); // before: 1-4 s in one stretch; loaded here: 0-80 ms
  });

  it("one read of the schema, and GraphiQL's introspection, are answered", async () => {
    const one = await post(`{ __schema { ${schemaRead} } __type(name: "Session") { name } }`);
    expect(one.body.errors).toBeUndefined();
    expect(one.body.data?.__schema).toBeTruthy();
    const { getIntrospectionQuery } = await import('graphql');
    const graphiql = await post(getIntrospectionQuery());
    expect(graphiql.body.errors).toBeUndefined();
    const twice = await post(`{ a: __type(name: "Session") { name } b: __type(name: "Event") { name } }`);
    expect(twice.body.errors?.[0].message).toMatch(/^Query.__type may be read at most once per operation/);
  });
});
