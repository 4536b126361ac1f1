// What a request leaves the process holding after it has been answered, or
// while it lives (docs/operations.md "Memory and time"), as an attacker sends
// it over each transport: POST /graphql (the fast lane and yoga), SSE and
// graphql-ws (the real `graphql-ws` client and raw `ws` frames). The service
// runs in this process, so its heap is measured directly, after a full GC.
//
// - Query texts were remembered by text whatever their length: yoga's parse
//   cache (1,024 documents, and as many parse errors) and the fast lane's own
//   kept every text for an hour. A comment makes any query as long as the body
//   limit (17 MiB): 1,000 of them would have been 17 GB.
// The figures before each fix are this process's (the service and the test's
// client together), measured on the old code.
// - A subscription holds its request as long as it lives (graphql-ws the whole
//   subscribe message, an SSE stream its body, twice, and the query text), and
//   a graphql-ws socket its connection_init payload.
// - Each page of events was held to FORKLINE_PAGE_BYTES, but one request may
//   ask for many pages.
import v8 from 'node:v8';
import vm from 'node:vm';
import WebSocket from 'ws';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribeSse, subscribeWs, wsClient } from '../helpers/subscribe.ts';
import { waitFor } from '../helpers/wait.ts';
import { DEFAULT_LIMITS } from '../../src/http/security.ts';
import { loadConfig, securityOptions } from '../../src/config.ts';

v8.setFlagsFromString('--expose-gc');
const gc = vm.runInNewContext('gc') as () => void;
const MiB = 1024 * 1024;

/** The heap and the buffers outside it in use after full collections: what something still references. */
function heldBytes(): number {
  gc();
  gc();
  const { heapUsed, external } = process.memoryUsage();
  return heapUsed + external;
}

let app: TestApp;
let sessionId: string;
beforeAll(async () => {
  app = await startTestApp();
  sessionId = (await app.ok('mutation { createSession(input: { title: "held" }) { id } }')).createSession.id;
});
afterAll(async () => {
  await app?.close();
});

/** `text` made `chars` long by a GraphQL comment that differs for each `n` (a new text each time). */
const padded = (text: string, n: number, chars: number) => {
  const head = `${text}\n# ${n} `;
  return head + 'x'.repeat(chars - head.length);
};

const post = async (body: unknown) => {
  const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, body: (await res.json()) as { data?: any; errors?: Array<{ message: string; extensions?: { code?: string } }> } };
};

/** One operation over a graphql-ws socket with the real client: its last result. */
const overWs = (client: ReturnType<typeof wsClient>, payload: { query: string; variables?: Record<string, unknown> }) =>
  new Promise<any>((resolve, reject) => {
    let got: unknown;
    client.subscribe(payload, { next: (r) => void (got = r), error: reject, complete: () => resolve(got) });
  });

describe('query texts remembered between requests', () => {
  const valid = (i: number) => post({ query: padded('{ __typename }', i, 4 * MiB) });
  const unparsable = (i: number) => post({ query: padded('{ __typename } }', i, 4 * MiB) });

  it('16 valid and 4 unparsable queries of 4 MiB over POST leave nothing held (before: 129 MiB, kept for an hour)', { timeout: 180_000 }, async () => {
    await valid(-1); // the paths warmed up before measuring
    await unparsable(-1);
    const before = heldBytes();
    for (let i = 0; i < 16; i++) expect((await valid(i)).body).toEqual({ data: { __typename: 'Query' } });
    for (let i = 0; i < 4; i++) expect((await unparsable(i)).body.errors?.[0].message).toMatch(/^Syntax Error/);
    const held = heldBytes() - before;
    console.log(`POST: ${(held / MiB).toFixed(1)} MiB held after 20 queries of 4 MiB`);
    expect(held).toBeLessThan(24 * MiB); // before: 129 MiB (each text, in each memory)
  });

  it('200 queries of 1 MB over graphql-ws leave nothing held (before: 193 MiB)', { timeout: 180_000 }, async () => {
    const client = wsClient(app.url);
    try {
      await overWs(client, { query: padded('{ __typename }', -1, 1_000_000) }); // the socket open, the paths warm, before measuring
      const before = heldBytes();
      for (let i = 0; i < 200; i++) {
        const r = await overWs(client, { query: padded('{ __typename }', i, 1_000_000) });
        expect(r).toEqual({ data: { __typename: 'Query' } });
      }
      const held = heldBytes() - before;
      console.log(`graphql-ws: ${(held / MiB).toFixed(1)} MiB held after 200 queries of 1 MB`);
      expect(held).toBeLessThan(24 * MiB); // before: 193 MiB
    } finally {
      await client.dispose();
    }
  });
});

describe('what a subscription holds while it lives', () => {
  const query = 'subscription($id: ID!) { sessionEvents(sessionId: $id, afterSeq: -1) { seq } }';

  /** The body of a subscription over SSE made `chars` long, sent from a scope of its own: the client keeps none of it. */
  const sseBody = (n: number, chars: number) => JSON.stringify({ query: padded(query, n, chars), variables: { id: sessionId } });

  /**
   * An SSE subscription: its first message's data, and how to close it. One that goes on is left open (the server
   * holds it); one that errs is read to its end. Only the response's reader is kept (the helper in
   * tests/helpers/subscribe.ts keeps the query it sent for as long as the subscription lives).
   */
  async function openSse(n: number, chars: number): Promise<{ first: any; close: () => Promise<void> }> {
    const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'text/event-stream' }, body: sseBody(n, chars) });
    const reader = res.body!.getReader();
    let text = '';
    while (!/data:.*\n/.test(text)) text += new TextDecoder().decode((await reader.read()).value ?? new Uint8Array());
    const first = JSON.parse(/data:(.*)\n/.exec(text)![1]);
    if (first.errors) while (!(await reader.read()).done);
    return { first, close: () => reader.cancel() };
  }

  it('8 SSE subscriptions with bodies of 4 MiB are refused before they start (before: 173 MiB held while they lived)', { timeout: 180_000 }, async () => {
    await (await openSse(-1, 4 * MiB)).close(); // the paths warmed up before measuring
    const before = heldBytes();
    const subs: Array<{ first: any; close: () => Promise<void> }> = [];
    try {
      for (let i = 0; i < 8; i++) subs.push(await openSse(i, 4 * MiB));
      const held = heldBytes() - before;
      console.log(`SSE: ${(held / MiB).toFixed(1)} MiB held with 8 subscriptions of 4 MiB`);
      for (const { first } of subs) {
        expect(first.data).toBeUndefined();
        expect(first.errors).toEqual([
          expect.objectContaining({
            message: expect.stringContaining('FORKLINE_MAX_HELD_REQUEST_CHARS'),
            extensions: { code: 'REQUEST_ENTITY_TOO_LARGE' },
          }),
        ]);
      }
      expect(held).toBeLessThan(24 * MiB);
    } finally {
      await Promise.all(subs.map((s) => s.close()));
    }
  });

  it(
    'over graphql-ws, a subscribe message of 1 MB in its query, variables, extensions or id is refused (before: 100 subscriptions held 313 MiB)',
    { timeout: 180_000 },
    async () => {
      // Raw frames: the client keeps nothing of what it sent (answers by the number before each id's colon).
      const ws = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
      const answers = new Map<string, { code?: string }>();
      ws.on('message', (m) => {
        const msg = JSON.parse(String(m));
        if (msg.type === 'next' || msg.type === 'error') answers.set(msg.id.split(':')[0], { code: msg.payload?.errors?.[0]?.extensions?.code ?? 'none' });
      });
      await new Promise((r) => ws.once('open', r));
      ws.send(JSON.stringify({ type: 'connection_init' }));
      await new Promise((r) => ws.once('message', r)); // connection_ack
      try {
        const pad = 'x'.repeat(1_000_000);
        const before = heldBytes();
        for (let i = 0; i < 100; i++) {
          const id = i % 4 === 3 ? `${i}:${pad}` : `${i}:`;
          const payload =
            i % 4 === 0
              ? { query: padded(query, i, 1_000_000), variables: { id: sessionId } }
              : i % 4 === 1
                ? { query, variables: { id: sessionId, pad } } // an extra variable: graphql-js ignores it, the message keeps it
                : i % 4 === 2
                  ? { query, variables: { id: sessionId }, extensions: { pad } }
                  : { query, variables: { id: sessionId } };
          ws.send(JSON.stringify({ id, type: 'subscribe', payload }));
        }
        await waitFor(() => answers.size === 100, { what: '100 answers' });
        const held = heldBytes() - before;
        console.log(`graphql-ws: ${(held / MiB).toFixed(1)} MiB held with 100 subscriptions of 1 MB`);
        expect(new Set([...answers.values()].map((a) => a.code))).toEqual(new Set(['REQUEST_ENTITY_TOO_LARGE']));
        expect(held).toBeLessThan(24 * MiB);
      } finally {
        ws.close();
      }
    },
  );

  it('a connection_init payload of 100,000 characters closes its socket with 4400 and says why (before: acknowledged, held for its life)', async () => {
    const ws = new WebSocket(app.url.replace(/^http/, 'ws'), 'graphql-transport-ws');
    await new Promise((r) => ws.once('open', r));
    const outcome = new Promise((resolve) => {
      ws.once('close', (code, reason) => resolve({ code, reason: String(reason) }));
      ws.once('message', (data) => resolve({ message: String(data) }));
    });
    ws.send(JSON.stringify({ type: 'connection_init', payload: { pad: 'x'.repeat(100_000) } }));
    expect(await outcome).toEqual({
      code: 4400,
      reason: expect.stringContaining('connection_init holds more than 65536 characters (FORKLINE_MAX_HELD_REQUEST_CHARS)'),
    });
  });

  it('an ordinary subscription, and one just under the limit, run over SSE and graphql-ws', async () => {
    const near = padded(query, 0, DEFAULT_LIMITS.maxHeldRequestChars - 200);
    for (const q of [query, near]) {
      const sse = subscribeSse(app.url, q, { id: sessionId });
      const ws = subscribeWs(app.url, q, { id: sessionId });
      try {
        await sse.count(1);
        await ws.count(1);
        expect(sse.items[0]).toEqual({ sessionEvents: { seq: 0 } });
        expect(ws.items[0]).toEqual({ sessionEvents: { seq: 0 } });
      } finally {
        await sse.close();
        await ws.close();
      }
    }
  });

  it('reads FORKLINE_MAX_HELD_REQUEST_CHARS', () => {
    expect(securityOptions(loadConfig({ FORKLINE_MAX_HELD_REQUEST_CHARS: '4096' })).maxHeldRequestChars).toBe(4096);
    expect(securityOptions(loadConfig({})).maxHeldRequestChars).toBe(DEFAULT_LIMITS.maxHeldRequestChars);
    expect(() => loadConfig({ FORKLINE_MAX_HELD_REQUEST_CHARS: '10' })).toThrow(/FORKLINE_MAX_HELD_REQUEST_CHARS/);
  });
});

describe('event data one request holds, whatever its number of pages', () => {
  // Each page was held to FORKLINE_PAGE_BYTES plus one event, but a request may ask for many pages: under a page of
  // sessions, or in aliases. 50 sessions × `events(first: 10) { data }` costs about 88,000 (under the limit of
  // 100,000) and, with events of 15 MB, could hold 50 × 30 MB = 1.5 GB; now all its pages share one budget.
  const PAGE_BYTES = 64 * 1024;
  const BIG = 20_000; // characters of each event's text: about three fill a page
  const SESSIONS = 20;
  const EVENTS = 8;
  let small: TestApp;
  beforeAll(async () => {
    small = await startTestApp({ pageBytes: PAGE_BYTES });
    for (let s = 0; s < SESSIONS; s++) {
      const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: `ses_wide${s}`, title: `wide ${s}` } }];
      for (let seq = 0; seq < EVENTS; seq++) lines.push({ seq, type: 'plugin/x/big', data: { text: `${s}/${seq} `.padEnd(BIG, 'x') } });
      const body = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
      const res = await fetch(new URL('/recordings', small.url), { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
      expect(res.status).toBe(201);
    }
  });
  afterAll(async () => {
    await small?.close();
  });

  const pages = `events(first: ${EVENTS}) { pageInfo { hasNextPage } edges { node { seq data } } }`;

  it(`a page of ${SESSIONS} sessions with a page of events each holds one page's bytes in all (before: ${SESSIONS} pages' worth)`, async () => {
    const d = await small.ok(`{ sessions(first: ${SESSIONS}) { edges { node { id ${pages} } } } }`);
    const sessions = d.sessions.edges.map((e: any) => e.node);
    expect(sessions).toHaveLength(SESSIONS);
    const read = sessions.flatMap((s: any) => s.events.edges.map((e: any) => e.node));
    const chars = read.reduce((n: number, e: any) => n + e.data.text.length, 0);
    console.log(`${read.length} events, ${chars} characters of data for ${SESSIONS} pages (budget ${PAGE_BYTES} bytes)`);
    expect(chars).toBeLessThanOrEqual(PAGE_BYTES + BIG); // the budget, plus the event that passes it (before: 80 events, 1.6 MB)
    expect(read.length).toBeGreaterThan(0);
    // Every event read comes whole; every page cut short (or left empty) says there is more.
    for (const e of read) expect(e.data.text).toMatch(/^\d+\/\d+ x+$/);
    for (const s of sessions) expect(s.events.pageInfo.hasNextPage).toBe(true);
    // Asked on its own, a page left empty comes as full as the budget allows.
    const empty = sessions.find((s: any) => s.events.edges.length === 0);
    expect(empty).toBeDefined();
    const alone = await small.ok(`query($id: ID!) { session(id: $id) { ${pages} } }`, { id: empty.id });
    expect(alone.session.events.edges.length).toBeGreaterThanOrEqual(Math.floor(PAGE_BYTES / BIG));
  });

  it("aliases of one session's pages share the budget too; pages without data are not held to it", async () => {
    const id = (await small.ok(`{ sessions(first: 1) { edges { node { id } } } }`)).sessions.edges[0].node.id;
    const aliases = Array.from({ length: 6 }, (_, i) => `a${i}: ${pages}`).join(' ');
    const d = await small.ok(`query($id: ID!) { session(id: $id) { ${aliases} heads: events(first: ${EVENTS}) { edges { node { seq type } } } } }`, { id });
    const chars = Object.entries(d.session)
      .filter(([k]) => k !== 'heads')
      .flatMap(([, page]: [string, any]) => page.edges)
      .reduce((n: number, e: any) => n + e.node.data.text.length, 0);
    expect(chars).toBeLessThanOrEqual(PAGE_BYTES + BIG);
    expect(d.session.heads.edges).toHaveLength(EVENTS);
  });
});

describe('reads bounded per field, multiplied by pages and aliases', () => {
  // Session.file (up to 1 MiB of content) and Session.fileChanges (up to 4 MiB of text diffed, for up to 2 s) are
  // bounded per read, and cost little in the estimate: a page of 500 sessions, or 30 aliases, made them 500 or 30 reads.
  it.each([
    ['Session.file', 'file(path: "a.txt") { text }', 'one file per request'],
    ['Session.fileChanges', 'fileChanges(fromSeq: -1) { diff }', 'one range of one session per request'],
    ['Session.files', 'files { path }', 'one tree per request'],
    ['Session.workspace', 'workspace { value }', 'one session’s notes per request'],
  ])('%s may be read once per operation: aliased or under a page of sessions, refused before anything runs', async (field, read, instead) => {
    const one = await app.gql(`query($id: ID!) { session(id: $id) { ${read} } }`, { id: sessionId });
    expect(one.errors).toBeUndefined();
    const aliased = await app.gql(`query($id: ID!) { session(id: $id) { a: ${read} b: ${read} } }`, { id: sessionId });
    expect(aliased.errors?.[0].message).toMatch(
      new RegExp(`^${field} may be read at most once per operation, and this one reads it up to 2 times \\(${instead}`),
    );
    expect(aliased.data).toBeUndefined();
    const page = await app.gql(`{ sessions(first: 500) { edges { node { ${read} } } } }`);
    expect(page.errors?.[0].message).toMatch(new RegExp(`^${field} may be read at most once per operation, and this one reads it up to 500 times`));
    expect(page.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
  });
});
