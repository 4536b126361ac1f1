// The rules at the doors hold through every transport GraphQL travels by
// (docs/operations.md "Threat model"): a refusal over HTTP (the fast lane and
// yoga), SSE and graphql-ws is the same refusal, with the same code, whether
// the input comes as variables or as literals, alone or aliased beside an
// accepted mutation in one document; nothing of a refused one is written.
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Client } from 'graphql-ws';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { wsClient } from '../helpers/subscribe.ts';
import { MAX_COMPACTION_INSTRUCTIONS_CHARS } from '../../src/core/text-limits.ts';
import { DEFAULT_LIMITS } from '../../src/http/security.ts';
import { MAX_VARIABLE_LIST_ITEMS, tooManyListItems } from '../../src/graphql/plugins/variable-shape.ts';
import { JSON_ENVELOPE_VALUES, MAX_JSON_TEXT_DEPTH, MAX_JSON_VALUES, nestedTooDeep, tooManyValues } from '../../src/core/storable.ts';
import { spent } from '../helpers/event-loop.ts';

let app: TestApp;
let ws: Client;

beforeAll(async () => {
  app = await startTestApp();
  ws = wsClient(app.url);
});
afterAll(async () => {
  await ws?.dispose();
  await app?.close();
});

interface Result {
  data?: Record<string, any> | null;
  errors?: Array<{ message: string; path?: unknown[]; extensions?: Record<string, any> }>;
}

/** Every way a GraphQL operation reaches the server. */
const DOORS = ['http', 'yoga', 'sse', 'ws'] as const;
type Door = (typeof DOORS)[number];

async function postJson(body: unknown, headers: Record<string, string> = {}): Promise<Result> {
  const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json', ...headers }, body: JSON.stringify(body) });
  return (await res.json()) as Result;
}

/** The first result of a POST answered as an event stream (yoga's SSE). */
async function postSse(body: unknown): Promise<Result> {
  const res = await fetch(app.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
    body: JSON.stringify(body),
  });
  const text = await res.text();
  const data = /^data: (.*)$/m.exec(text)?.[1];
  if (!data) throw new Error(`no SSE result (HTTP ${res.status}): ${text.slice(0, 300)}`);
  return JSON.parse(data) as Result;
}

/** The first result of an operation over graphql-ws (an operation refused before it runs arrives as an `error` message). */
function overWs(query: string, variables?: Record<string, unknown>): Promise<Result> {
  return new Promise((resolve, reject) => {
    let first: Result | undefined;
    ws.subscribe(
      { query, variables },
      {
        next: (r) => void (first ??= r as Result),
        error: (e) => (Array.isArray(e) ? resolve({ errors: e as Result['errors'] }) : reject(e instanceof Error ? e : new Error(JSON.stringify(e)))),
        complete: () => (first ? resolve(first) : reject(new Error('completed without a result'))),
      },
    );
  });
}

function through(door: Door, query: string, variables?: Record<string, unknown>): Promise<Result> {
  switch (door) {
    case 'http':
      return postJson({ query, variables }); // the fast lane
    case 'yoga':
      return postJson({ query, variables, extensions: {} }); // a request the fast lane leaves to yoga
    case 'sse':
      return postSse({ query, variables });
    case 'ws':
      return overWs(query, variables);
  }
}

const codeOf = (r: Result) => r.errors?.[0]?.extensions?.code;
const eventCount = async (id: string) => (await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id })).session.eventCount as number;
const sessionCount = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;

/** A session of a runner pool, claimed, with one input waiting. */
async function claimed(pool: string): Promise<{ id: string; token: number; inputId: string }> {
  const { id } = (await app.ok(`mutation($p: String!) { createSession(input: {title: "door", runner: $p}) { id } }`, { p: pool })).createSession;
  const { inputId } = (await app.ok(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "go"}) { inputId } }`, { id })).sendMessage;
  const token = (await app.ok(`mutation($id: ID!) { claimSession(input: {sessionId: $id, runnerId: "r"}) { lease { token } } }`, { id })).claimSession.lease
    .token;
  return { id, token, inputId };
}

/** A GraphQL literal of a JSON value (object keys unquoted). */
const literal = (v: unknown): string =>
  Array.isArray(v)
    ? `[${v.map(literal).join(', ')}]`
    : v !== null && typeof v === 'object'
      ? `{${Object.entries(v)
          .map(([k, x]) => `${k}: ${literal(x)}`)
          .join(', ')}}`
      : JSON.stringify(v);

const askApproval = (inputId: string) => [
  { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
  { type: 'turn/start', data: { turn: 1, inputId } },
  { type: 'step/start', data: { turn: 1, step: 1 } },
  { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'shell', arguments: '{}' }] } },
  { type: 'tool/approval-request', data: { turn: 1, step: 1, callId: 'c1' } },
];
const forgedApproval = { type: 'tool/approval', data: { callId: 'c1', decision: 'approved', reason: '', by: 'token:admin' } };
const compactionStart = (instructions: string) => ({ type: 'plugin/compaction/start', data: { reason: 'manual', fromSeq: 0, toSeq: 0, instructions } });
const overInstructions = 'x'.repeat(MAX_COMPACTION_INSTRUCTIONS_CHARS + 1);
const twiceNamed = [
  { name: 'x', effect: 'READ_ONLY' },
  { name: 'x', effect: 'SIDE_EFFECTS' },
];
const deepSchema = (depth: number): unknown => (depth === 0 ? {} : { a: deepSchema(depth - 1) });

const APPEND = `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`;
const DECLARE = `mutation($input: DeclareRunnerToolsInput!) { declareRunnerTools(input: $input) { id } }`;
const IMPORT = `mutation($r: String!) { importRecording(recording: $r) { id } }`;
const recording = (events: unknown[]) =>
  [{ format: 'forkline.recording', version: 4, session: { id: 'ses_door', title: 'door' } }, ...events.map((e, seq) => ({ seq, ...(e as object) }))]
    .map((l) => JSON.stringify(l))
    .join('\n') + '\n';

/**
 * One refusal as each door is sent it: `send` makes what it needs (a fresh
 * claimed session) and sends its operation through the door; `written`
 * counts what it may have left (it must not change).
 */
interface Refusal {
  name: string;
  code: string;
  rule?: string;
  message: RegExp;
  send(door: Door): Promise<{ result: Result; written: () => Promise<number>; before: number }>;
}

/** A refusal sent to a claimed runner session: the session's events must not grow. */
const onClaimed =
  (pool: string, op: (s: { id: string; token: number; inputId: string }) => { query: string; variables?: Record<string, unknown> }) => async (door: Door) => {
    const s = await claimed(`${pool}-${door}`);
    const before = await eventCount(s.id);
    const { query, variables } = op(s);
    return { result: await through(door, query, variables), written: () => eventCount(s.id), before };
  };

/** A refused import: the tenant's sessions must not grow. */
const importing = (query: (text: string) => { query: string; variables?: Record<string, unknown> }, events: unknown[]) => async (door: Door) => {
  const before = await sessionCount();
  const op = query(recording(events));
  return { result: await through(door, op.query, op.variables), written: sessionCount, before };
};

const REFUSALS: Refusal[] = [
  {
    name: 'a runner forging a tool/approval (variables)',
    code: 'BAD_USER_INPUT',
    rule: 'runner events',
    message: /a runner does not write tool\/approval events/,
    send: onClaimed('forge-v', (s) => ({
      query: APPEND,
      variables: { input: { sessionId: s.id, leaseToken: s.token, expectedEventCount: 2, events: [...askApproval(s.inputId), forgedApproval] } },
    })),
  },
  {
    name: 'a runner forging a tool/approval (literals)',
    code: 'BAD_USER_INPUT',
    rule: 'runner events',
    message: /a runner does not write tool\/approval events/,
    send: onClaimed('forge-l', (s) => ({
      query: `mutation { appendEvents(input: {sessionId: "${s.id}", leaseToken: ${s.token}, expectedEventCount: 2, events: ${literal([...askApproval(s.inputId), forgedApproval])}}) { eventCount } }`,
    })),
  },
  {
    name: 'a tool set naming a tool twice (variables)',
    code: 'BAD_USER_INPUT',
    rule: 'runner tools',
    message: /name "x" twice/,
    send: onClaimed('twice-v', (s) => ({ query: DECLARE, variables: { input: { sessionId: s.id, leaseToken: s.token, tools: twiceNamed } } })),
  },
  {
    name: 'a tool set naming a tool twice (literals)',
    code: 'BAD_USER_INPUT',
    rule: 'runner tools',
    message: /name "x" twice/,
    send: onClaimed('twice-l', (s) => ({
      query: `mutation { declareRunnerTools(input: {sessionId: "${s.id}", leaseToken: ${s.token}, tools: [{name: "x", effect: READ_ONLY}, {name: "x", effect: SIDE_EFFECTS}]}) { id } }`,
    })),
  },
  {
    name: 'a runner-tools event naming a tool twice in a batch',
    code: 'BAD_USER_INPUT',
    message: /names each tool once/,
    send: onClaimed('twice-e', (s) => ({
      query: APPEND,
      variables: {
        input: {
          sessionId: s.id,
          leaseToken: s.token,
          expectedEventCount: 2,
          events: [{ type: 'session/runner-tools', data: { tools: twiceNamed.map((t) => ({ name: t.name, effect: 'read-only' })) } }],
        },
      },
    })),
  },
  {
    name: 'a tool schema nested past 64 levels (variables)',
    code: 'BAD_USER_INPUT',
    message: /nested deeper than 64 levels/,
    send: onClaimed('deep-v', (s) => ({
      query: DECLARE,
      variables: { input: { sessionId: s.id, leaseToken: s.token, tools: [{ name: 'deep', effect: 'READ_ONLY', inputSchema: deepSchema(200) }] } }, // within the text's 256 levels
    })),
  },
  {
    name: 'a tool schema nested past 64 levels (literals)',
    code: 'BAD_USER_INPUT',
    message: /nested deeper than 64 levels/,
    send: onClaimed('deep-l', (s) => ({
      query: `mutation { declareRunnerTools(input: {sessionId: "${s.id}", leaseToken: ${s.token}, tools: [{name: "deep", effect: READ_ONLY, inputSchema: ${literal(deepSchema(100))}}]}) { id } }`,
    })),
  },
  {
    name: "compaction instructions past the limit in a runner's batch (variables)",
    code: 'BAD_USER_INPUT',
    message: /instructions/,
    send: onClaimed('compact-v', (s) => ({
      query: APPEND,
      variables: { input: { sessionId: s.id, leaseToken: s.token, expectedEventCount: 2, events: [compactionStart(overInstructions)] } },
    })),
  },
  {
    name: "compaction instructions past the limit in a runner's batch (literals)",
    code: 'BAD_USER_INPUT',
    message: /instructions/,
    send: onClaimed('compact-l', (s) => ({
      query: `mutation { appendEvents(input: {sessionId: "${s.id}", leaseToken: ${s.token}, expectedEventCount: 2, events: ${literal([compactionStart(overInstructions)])}}) { eventCount } }`,
    })),
  },
  {
    name: 'compactSession with instructions past the limit',
    code: 'BAD_USER_INPUT',
    message: /instructions/,
    send: onClaimed('compact-m', (s) => ({
      query: `mutation($input: CompactSessionInput!) { compactSession(input: $input) { summarySeq } }`,
      variables: { input: { sessionId: s.id, instructions: overInstructions } },
    })),
  },
  {
    name: 'a recording with compaction instructions past the limit (variables)',
    code: 'BAD_USER_INPUT',
    rule: 'codec',
    message: /instructions/,
    send: importing((r) => ({ query: IMPORT, variables: { r } }), [compactionStart(overInstructions)]),
  },
  {
    name: 'a recording with a title marked synthetic (variables)',
    code: 'BAD_USER_INPUT',
    rule: 'synthetic closer',
    message: /only repair's closers are synthetic/,
    send: importing((r) => ({ query: IMPORT, variables: { r } }), [{ type: 'session/title', data: { title: 'x' }, synthetic: true }]),
  },
  {
    name: 'a recording with a title marked synthetic (literal)',
    code: 'BAD_USER_INPUT',
    rule: 'synthetic closer',
    message: /only repair's closers are synthetic/,
    send: importing(
      (r) => ({ query: `mutation { importRecording(recording: ${JSON.stringify(r)}) { id } }` }),
      [{ type: 'session/title', data: { title: 'x' }, synthetic: true }],
    ),
  },
  {
    name: 'text Postgres cannot store (U+0000) in a variable',
    code: 'BAD_USER_INPUT',
    message: /strings/,
    send: onClaimed('nul-v', (s) => ({
      query: `mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`,
      variables: { id: s.id, t: 'a\u0000b' },
    })),
  },
];

describe('each refusal, through every door', () => {
  it.each(REFUSALS.map((r) => [r.name, r] as const))('%s', async (_name, refusal) => {
    let overHttp: Result['errors'];
    for (const door of DOORS) {
      const { result, written, before } = await refusal.send(door);
      const seen = { door, code: codeOf(result), rule: result.errors?.[0]?.extensions?.rule };
      expect(seen).toEqual({ door, code: refusal.code, rule: refusal.rule });
      expect([door, result.errors?.[0]?.message]).toEqual([door, expect.stringMatching(refusal.message)]);
      expect([door, result.data ?? null]).toEqual([door, null]);
      expect([door, await written()]).toEqual([door, before]);
      // The same refusal, word for word, as the HTTP door's (seqs and ids aside: each door has its own session).
      const words = result.errors!.map((e) => ({ ...e, message: e.message.replace(/ses_\w+/g, 'ses_') }));
      overHttp ??= words;
      expect([door, words]).toEqual([door, overHttp]);
    }
  });
});

describe('several mutations in one document', () => {
  it('an aliased mutation beside an accepted one is refused alone, alike at every door', async () => {
    const BOTH = `mutation($ok: AppendEventsInput!, $bad: AppendEventsInput!) { a: appendEvents(input: $ok) { eventCount } b: appendEvents(input: $bad) { eventCount } }`;
    const seen: unknown[] = [];
    for (const door of DOORS) {
      const s = await claimed(`aliased-${door}`);
      const input = (expectedEventCount: number, events: unknown[]) => ({ sessionId: s.id, leaseToken: s.token, expectedEventCount, events });
      const r = await through(door, BOTH, { ok: input(2, askApproval(s.inputId)), bad: input(7, [forgedApproval]) });
      // Mutations run in order: the first is written, the second refused (its non-null field nulls `data`).
      seen.push({ door, errors: r.errors?.map((e) => ({ path: e.path, code: e.extensions?.code, rule: e.extensions?.rule })), count: await eventCount(s.id) });
    }
    expect(seen).toEqual(DOORS.map((door) => ({ door, errors: [{ path: ['b'], code: 'BAD_USER_INPUT', rule: 'runner events' }], count: 7 })));
  });
});

/** The first result of a subscription over SSE and over graphql-ws. */
async function subscriptionRefusals(query: string, variables?: Record<string, unknown>) {
  return { sse: await postSse({ query, variables }), ws: await overWs(query, variables) };
}

describe('subscriptions', () => {
  it('variables past the list items or input fields their types allow are refused before coercion, alike at every door', async () => {
    const CREATE = `mutation($input: CreateSessionInput!) { createSession(input: $input) { id } }`;
    const before = await sessionCount();
    const cases = [
      [{ tools: Array(MAX_VARIABLE_LIST_ITEMS + 1).fill('t') }, tooManyListItems('$input.tools')],
      [
        { title: 'x', model: { provider: 'scripted', model: 'm', tmperature: 1 } },
        'variables: $input.model: field "tmperature" is not defined by type "ModelConfigInput"',
      ],
      [{ model: { model: 'm', settings: {} } }, 'variables: $input.model: field "provider" of required type "String!" was not provided'],
    ] as const;
    for (const [input, message] of cases) {
      for (const door of DOORS) {
        const r = await through(door, CREATE, { input });
        expect(codeOf(r), door).toBe('BAD_USER_INPUT');
        expect(r.errors?.[0].message, door).toBe(message);
      }
    }
    expect(await sessionCount()).toBe(before);
  });

  it('a subscription past the query limits is refused over SSE and graphql-ws alike', async () => {
    const { id } = (await app.ok(`mutation { createSession(input: {title: "subs"}) { id } }`)).createSession;
    const aliases = (n: number) => Array.from({ length: n }, (_, i) => `a${i}: seq`).join(' ');
    const pages = Array.from({ length: 10 }, (_, i) => `p${i}: events(first: 500) { edges { node { data } } }`).join(' ');
    const cases = [
      [`subscription($id: ID!) { sessionEvents(sessionId: $id) { ${aliases(DEFAULT_LIMITS.maxAliases + 1)} } }`, /Aliases limit/],
      [`subscription { sessionsChanged { ${pages} } }`, /Query Cost limit/],
      [`subscription { sessionsChanged {${' parent {'.repeat(DEFAULT_LIMITS.maxDepth)} id${' }'.repeat(DEFAULT_LIMITS.maxDepth)} } }`, /depth limit/],
    ] as const;
    for (const [query, message] of cases) {
      const { sse, ws: overSocket } = await subscriptionRefusals(query, { id });
      for (const r of [sse, overSocket]) {
        expect(codeOf(r)).toBe('BAD_USER_INPUT');
        expect(r.errors?.[0].message).toMatch(message);
      }
      expect(overSocket.errors).toEqual(sse.errors);
    }
  });
});

/** A raw graphql-ws socket, acknowledged; `closed` resolves with its close code. */
async function rawSocket(opts: WebSocket.ClientOptions = {}) {
  const socket = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws', opts);
  const closed = new Promise<number>((resolve) => socket.on('close', (code) => resolve(code)));
  const messages: any[] = [];
  socket.on('message', (m) => messages.push(JSON.parse(String(m))));
  await new Promise<void>((resolve, reject) => {
    socket.once('error', reject);
    socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: {} })));
    const ack = () => (messages.some((m) => m.type === 'connection_ack') ? resolve() : socket.once('message', ack));
    socket.once('message', ack);
  });
  const answer = async (id: string) => {
    await expect.poll(() => messages.find((m) => m.id === id && (m.type === 'next' || m.type === 'error')), { timeout: 15_000 }).toBeTruthy();
    const m = messages.find((x) => x.id === id && (x.type === 'next' || x.type === 'error'));
    return (m.type === 'error' ? { errors: m.payload } : m.payload) as Result;
  };
  return { socket, closed, answer };
}

describe('what one WebSocket message may cost', () => {
  it('a message over the 1 MiB frame limit closes the socket (1009) before anything runs, and is not logged as our error', async () => {
    const printed = vi.spyOn(console, 'error');
    const before = await sessionCount();
    const { socket, closed } = await rawSocket();
    const big = recording([{ type: 'session/title', data: { title: 'x'.repeat(1024 * 1024) } }]);
    socket.send(JSON.stringify({ id: '1', type: 'subscribe', payload: { query: IMPORT, variables: { r: big } } }));
    expect(await closed).toBe(1009);
    expect(await sessionCount()).toBe(before);
    // graphql-ws printed a client's oversized frame as "Internal error emitted on a WebSocket socket".
    expect(printed.mock.calls.filter((c) => /Internal error/.test(String(c[0])))).toEqual([]);
    printed.mockRestore();
  });

  it('a message is never inflated: the server does not agree to permessage-deflate', async () => {
    const { socket } = await rawSocket({ perMessageDeflate: true });
    expect(socket.extensions).toBe('');
    socket.close();
  });

  it('a tool schema 20,000 levels deep in a message closes the socket (4400) before it is parsed, as HTTP answers 400', async () => {
    const s = await claimed('deep-raw');
    const { socket, closed } = await rawSocket();
    const reason = new Promise<string>((resolve) => socket.on('close', (_code, why) => resolve(String(why))));
    const depth = 20_000; // built as text: JSON.stringify of such a value overflows the client's own stack
    const schema = '{"a":'.repeat(depth) + '{}' + '}'.repeat(depth);
    const variables = `{"input":{"sessionId":"${s.id}","leaseToken":${s.token},"tools":[{"name":"deep","effect":"READ_ONLY","inputSchema":${schema}}]}}`;
    const body = `{"query":${JSON.stringify(DECLARE)},"variables":${variables}}`;
    socket.send(`{"id":"d","type":"subscribe","payload":${body}}`);
    expect(await closed).toBe(4400);
    expect(await reason).toBe(`a message ${nestedTooDeep(MAX_JSON_TEXT_DEPTH)}`);
    const overHttp = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
    expect(overHttp.status).toBe(400);
    expect(((await overHttp.json()) as Result).errors?.[0].message).toBe(`the request body ${nestedTooDeep(MAX_JSON_TEXT_DEPTH)}`);
    expect(await eventCount(s.id)).toBe(2);
  });
});

describe('JSON in URL-encoded parameters and form parts', () => {
  const TOO_DEEP = nestedTooDeep(MAX_JSON_TEXT_DEPTH);
  const nested = (levels: number) => '['.repeat(levels) + ']'.repeat(levels);
  const QUERY = '{ __typename }';
  // Any client can send yoga's CSRF header; a browser's form cannot.
  const CSRF = { 'x-graphql-yoga-csrf': '1' };
  const answer = async (res: Response) => ({ status: res.status, body: (await res.json()) as Result });
  // Brackets as they are (a URL's query may hold them), so 5,000 levels fit in Node's 16 KiB of headers.
  const get = (name: string, json: string, headers: Record<string, string> = {}) =>
    fetch(`${app.url}?query=${encodeURIComponent(QUERY)}&${name}=${json}`, { headers: { ...CSRF, ...headers } }).then(answer);
  const form = (body: string) =>
    fetch(app.url, { method: 'POST', headers: { ...CSRF, 'content-type': 'application/x-www-form-urlencoded' }, body }).then(answer);

  it('GET variables and extensions nested past the bound are refused as a POST body is, over plain GET and SSE (before: answered 200)', async () => {
    // 5,000 levels: 10 kB (a proxy or --max-http-header-size lets far more through).
    const deep = `{"v":${nested(5000)}}`;
    const overPost = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"query":"${QUERY}","variables":${deep}}`,
    }).then(answer);
    expect(overPost).toEqual({ status: 400, body: { errors: [{ message: `the request body ${TOO_DEEP}`, extensions: { code: 'BAD_USER_INPUT' } }] } });
    for (const name of ['variables', 'extensions']) {
      for (const headers of [{}, { accept: 'text/event-stream' }] as Array<Record<string, string>>) {
        const refused = await get(name, deep, headers);
        expect(refused).toEqual({ status: 400, body: { errors: [{ message: `the ${name} parameter ${TOO_DEEP}`, extensions: { code: 'BAD_USER_INPUT' } }] } });
      }
      // Each parameter's text is held to the bound a body's text is: at it, answered.
      const atBound = await get(name, `{"v":${nested(MAX_JSON_TEXT_DEPTH - 1)}}`);
      expect(atBound).toEqual({ status: 200, body: { data: { __typename: 'Query' } } });
      const past = await get(name, `{"v":${nested(MAX_JSON_TEXT_DEPTH)}}`);
      expect(past.body.errors?.[0].message).toBe(`the ${name} parameter ${TOO_DEEP}`);
    }
  });

  it('a form-urlencoded body is held to the bounds decoded (before: 100,000 levels answered 200, a million values parsed for seconds)', async () => {
    const deep = `query=${encodeURIComponent(QUERY)}&variables=${encodeURIComponent(`{"v":${nested(100_000)}}`)}`;
    expect(await form(deep)).toEqual({
      status: 400,
      body: { errors: [{ message: `the variables parameter ${TOO_DEEP}`, extensions: { code: 'BAD_USER_INPUT' } }] },
    });
    // Brackets and commas percent-encoded: the text as sent holds none.
    const many = new Array(MAX_JSON_VALUES + JSON_ENVELOPE_VALUES).fill(0).join(',');
    const values = `query=${encodeURIComponent(QUERY)}&variables=${encodeURIComponent(`{"v":[${many}]}`)}`;
    const { result, cpuMs } = await spent(() => form(values));
    expect(result).toEqual({
      status: 413,
      body: {
        errors: [
          {
            message: `the variables parameter ${tooManyValues(MAX_JSON_VALUES)}: send fewer events or values per request`,
            extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' },
          },
        ],
      },
    });
    expect(cpuMs).toBeLessThan(2000); // before: 4.5 s, parsed and walked
    expect(await form(`query=${encodeURIComponent(QUERY)}&variables=${encodeURIComponent('{"v":[[1]]}')}`)).toEqual({
      status: 200,
      body: { data: { __typename: 'Query' } },
    });
  });

  it('a multipart body is refused (415): no upload needs it, and its operations part escaped the bound (before: 200,000 levels behind an unbalanced quote answered 200)', async () => {
    const boundary = 'b0undary';
    const operations = `{"query":"${QUERY}","variables":{"a":"x","v":${nested(200_000)},"b":"y"}}`;
    // A quote before the first part turns the text scan's strings inside out: the brackets between two JSON strings look quoted.
    const body = `"\r\n--${boundary}\r\nContent-Disposition: form-data; name="operations"\r\n\r\n${operations}\r\n--${boundary}\r\nContent-Disposition: form-data; name="map"\r\n\r\n{}\r\n--${boundary}--\r\n`;
    const res = await fetch(app.url, { method: 'POST', headers: { ...CSRF, 'content-type': `multipart/form-data; boundary=${boundary}` }, body });
    await res.arrayBuffer();
    expect(res.status).toBe(415);
  });
});
