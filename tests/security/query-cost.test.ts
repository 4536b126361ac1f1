// Cost and size limits whatever the request's shape: page sizes from
// variables and defaults count, `nodes(ids:)` is capped, `Session.recording`
// aliases count, the alias rule counts `__typename`, and a response over the
// configured size is refused on every door (HTTP, its fast lane, graphql-ws).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { wsClient } from '../helpers/subscribe.ts';
import { DEFAULT_LIMITS } from '../../src/http/security.ts';
import { MAX_NODE_IDS } from '../../src/graphql/builder.ts';
import { loadConfig, securityOptions } from '../../src/config.ts';

let app: TestApp;
let sessionId: string;

const codeOf = (r: { errors?: Array<{ extensions?: Record<string, unknown> }> }) => r.errors?.[0]?.extensions?.code;
const aliased = (n: number, field: string) => Array.from({ length: n }, (_, i) => `a${i}: ${field}`).join(' ');

beforeAll(async () => {
  app = await startTestApp();
  sessionId = (await app.ok('mutation { createSession(input: { title: "cost" }) { id } }')).createSession.id;
});
afterAll(() => app?.close());

describe('query cost', () => {
  // The finding: 30 aliased event pages under a sessions page, sizes as variables (a 121 MB response).
  const wide = `query($n: Int) { sessions(first: $n) { edges { node { ${aliased(30, 'events(first: $n) { edges { node { id data } } }')} } } } }`;

  it('counts page sizes sent as variables like literals', async () => {
    const r = await app.gql(wide, { n: 500 });
    expect(codeOf(r)).toBe('BAD_USER_INPUT');
    expect(r.errors![0].message).toMatch(/^Query Cost limit of 100000 exceeded, found \d+/);
    expect(r.data).toBeUndefined();
    const literal = await app.gql(wide.replace('query($n: Int) ', '').replaceAll('$n', '500'));
    expect(r.errors![0].message).toBe(literal.errors![0].message);
    const small = await app.gql(wide, { n: 1 });
    expect(small.errors).toBeUndefined();
    expect(small.data.sessions.edges).toHaveLength(1);
  });

  it("counts a variable's default, and a connection's default page size when first/last are omitted", async () => {
    const withDefault = await app.gql(wide.replace('$n: Int', '$n: Int = 500'));
    expect(codeOf(withDefault)).toBe('BAD_USER_INPUT');
    expect(withDefault.errors![0].message).toMatch(/Cost limit/);
    // 50 sessions × 50 events each by default.
    const omitted = await app.gql('{ sessions { edges { node { events { edges { node { id data } } } } } } }');
    expect(codeOf(omitted)).toBe('BAD_USER_INPUT');
    expect(omitted.errors![0].message).toMatch(/Cost limit/);
    expect((await app.gql('{ sessions(first: 5) { edges { node { events(first: 20) { edges { node { id data } } } } } } }')).errors).toBeUndefined();
  });

  it('serves one Session.recording per operation: two, aliased or under a page, are refused before anything runs', async () => {
    const one = await app.gql('query($id: ID!) { session(id: $id) { recording } }', { id: sessionId });
    expect(one.errors).toBeUndefined();
    expect(one.data.session.recording).toMatch(/^\{"format":"forkline.recording"/);
    const several = await app.gql(`query($id: ID!) { session(id: $id) { ${aliased(2, 'recording')} } }`, { id: sessionId });
    expect(codeOf(several)).toBe('BAD_USER_INPUT');
    expect(several.errors![0].message).toBe(
      'Session.recording may be read at most once per operation, and this one reads it up to 2 times (GET /recordings?session=<id> streams a recording)',
    );
    expect(several.data).toBeUndefined();
    const page = await app.gql('{ sessions(first: 10) { edges { node { ...R } } } } fragment R on Session { recording }');
    expect(page.errors![0].message).toMatch(/^Session.recording may be read at most once per operation, and this one reads it up to 10 times/);
  });
});

describe('nodes(ids:)', () => {
  const nodes = (ids: string[]) => app.gql('query($ids: [ID!]!) { nodes(ids: $ids) { id } }', { ids });

  it(`takes up to ${MAX_NODE_IDS} ids and refuses more with BAD_USER_INPUT`, async () => {
    const ok = await nodes(Array(MAX_NODE_IDS).fill(sessionId));
    expect(ok.errors).toBeUndefined();
    expect(ok.data.nodes).toHaveLength(MAX_NODE_IDS);
    expect(ok.data.nodes[0]).toEqual({ id: sessionId });
    const over = await nodes(Array(MAX_NODE_IDS + 1).fill(sessionId));
    expect(codeOf(over)).toBe('BAD_USER_INPUT');
    expect(over.errors![0].message).toBe(`ids: at most ${MAX_NODE_IDS} ids per nodes query (got ${MAX_NODE_IDS + 1})`);
    // 30,000 ids took 10 s; refused before any lookup.
    const many = await nodes(Array.from({ length: 30_000 }, (_, i) => `ses_${i}`));
    expect(codeOf(many)).toBe('BAD_USER_INPUT');
    expect(many.data).toBeUndefined();
  });
});

describe('aliases', () => {
  it(`refuses more than ${DEFAULT_LIMITS.maxAliases} aliases, __typename ones too, as docs/operations.md says`, async () => {
    expect((await app.gql(`{ ${aliased(DEFAULT_LIMITS.maxAliases, '__typename')} }`)).errors).toBeUndefined();
    const over = await app.gql(`{ ${aliased(DEFAULT_LIMITS.maxAliases + 1, '__typename')} }`);
    expect(codeOf(over)).toBe('BAD_USER_INPUT');
    expect(over.errors![0].message).toMatch(/Aliases limit of 30 exceeded, found 31/);
    const mixed = await app.gql(`query($id: ID!) { ${aliased(20, '__typename')} session(id: $id) { ${aliased(11, 'id')} } }`, { id: sessionId });
    expect(mixed.errors![0].message).toMatch(/Aliases limit of 30 exceeded, found 31/);
  });
});

describe('response size', () => {
  it('reads FORKLINE_MAX_RESPONSE_BYTES', () => {
    expect(securityOptions(loadConfig({ FORKLINE_MAX_RESPONSE_BYTES: '65536' })).maxResponseBytes).toBe(65536);
    expect(securityOptions(loadConfig({})).maxResponseBytes).toBe(DEFAULT_LIMITS.maxResponseBytes);
    expect(() => loadConfig({ FORKLINE_MAX_RESPONSE_BYTES: 'lots' })).toThrow(/FORKLINE_MAX_RESPONSE_BYTES/);
  });

  it('refuses a response over the limit with RESPONSE_TOO_LARGE over HTTP and graphql-ws; smaller ones are served', async () => {
    const maxResponseBytes = 64 * 1024;
    const small = await startTestApp({ security: { maxResponseBytes } });
    const ws = wsClient(small.url);
    try {
      const id = (await small.ok('mutation { createSession(input: { title: "big" }) { id } }')).createSession.id;
      const sent = await small.gql('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', {
        i: { sessionId: id, text: 'x'.repeat(100 * 1024) },
      });
      expect(sent.errors).toBeUndefined();
      const query = 'query($id: ID!) { session(id: $id) { events(first: 5) { edges { node { seq data } } } } }';

      const big = await small.gql(query, { id });
      expect(big.status).toBe(200);
      expect(big.data).toBeNull();
      expect(big.errors).toHaveLength(1);
      expect(big.errors![0].extensions).toEqual({ code: 'RESPONSE_TOO_LARGE' });
      expect(big.errors![0].message).toMatch(/^the response would be \d+ bytes, over the limit of 65536 \(FORKLINE_MAX_RESPONSE_BYTES\)/);

      const overWs = await new Promise<any>((resolve, reject) => {
        let got: unknown;
        ws.subscribe({ query, variables: { id } }, { next: (r) => void (got = r), error: reject, complete: () => resolve(got) });
      });
      expect(overWs.data).toBeNull();
      expect(overWs.errors[0].extensions).toEqual({ code: 'RESPONSE_TOO_LARGE' });

      const ok = await small.gql('query($id: ID!) { session(id: $id) { events(first: 5) { edges { node { seq type } } } } }', { id });
      expect(ok.errors).toBeUndefined();
      expect(ok.data.session.events.edges[0]).toEqual({ node: { seq: 0, type: expect.any(String) } });

      // A mutation's response over the limit says it was applied.
      const renamed = await small.gql(
        'mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "renamed") { events(first: 5) { edges { node { data } } } } }',
        { id },
      );
      expect(renamed.errors![0].extensions).toEqual({ code: 'RESPONSE_TOO_LARGE' });
      expect(renamed.errors![0].message).toMatch(/\(the mutation was applied\)/);
      expect((await small.ok('query($id: ID!) { session(id: $id) { title } }', { id })).session.title).toBe('renamed');
    } finally {
      await ws.dispose();
      await small.close();
    }
  });
});
