// Session.tools of a runner's session is the tools its runner declared: up to
// 500 of 64 KiB schemas each, 32 MB a read. The cost limit prices the list as
// a few leaves, so `sessions(first: 50) { edges { node { tools { inputSchema } } } }`
// or 100 ids of `nodes` made one request hold 50 (100) such reads at once.
// Session.tools is now read at most once per operation, as a session's files
// and notes are: such a document is refused before anything runs.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { claimedRunnerSession, DECLARE_RUNNER_TOOLS } from './hostile-doors.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

/** A runner session whose runner declared `count` tools of schemas of about 1,000 characters. */
async function runnerSessionWithTools(count: number): Promise<string> {
  const s = await claimedRunnerSession(app);
  const tools = Array.from({ length: count }, (_, i) => ({
    name: `t${i}`,
    effect: 'READ_ONLY',
    inputSchema: { type: 'object', description: 'd'.repeat(1000) },
  }));
  const declared = await app.gql(DECLARE_RUNNER_TOOLS, { input: { sessionId: s.id, leaseToken: s.token, tools } });
  expect(declared.errors).toBeUndefined();
  return s.id;
}

const TOOLS = 'tools { name inputSchema }';

describe('Session.tools across sessions', () => {
  let ids: string[];
  beforeAll(async () => {
    ids = [await runnerSessionWithTools(20), await runnerSessionWithTools(20)];
  });

  it.each([
    ['a page of 50 sessions', `{ sessions(first: 50) { edges { node { id ${TOOLS} } } } }`, {}, 50],
    ['nodes(ids:) of 100 ids', `query($ids: [ID!]!) { nodes(ids: $ids) { ... on Session { id ${TOOLS} } } }`, 'ids', 100],
  ])('%s is refused before anything runs, naming the field and what to do instead', async (_what, query, vars, times) => {
    const variables = vars === 'ids' ? { ids: Array.from({ length: 100 }, (_, i) => ids[i % 2]) } : {};
    const r = await app.gql(query, variables);
    // Refused in validation, before any resolver ran: no data at all.
    expect(r.data).toBeUndefined();
    expect(r.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(r.errors?.[0].message).toBe(
      `Session.tools may be read at most once per operation, and this one reads it up to ${times} times ` +
        '(one session’s tools per request: a runner’s may be 500 of 64 KiB schemas; `tools` lists the catalog)',
    );
  });

  it("one session's tools are read whole, and a page that does not select them is not refused", async () => {
    const read = await app.ok(`query($id: ID!) { session(id: $id) { ${TOOLS} } }`, { id: ids[0] });
    expect(read.session.tools).toHaveLength(20);
    expect(read.session.tools[19]).toEqual({ name: 't19', inputSchema: { type: 'object', description: 'd'.repeat(1000) } });
    const page = await app.ok(`{ sessions(first: 50) { edges { node { id } } } }`);
    expect(page.sessions.edges.map((e: { node: { id: string } }) => e.node.id)).toEqual(expect.arrayContaining(ids));
    const one = await app.ok(`{ sessions(first: 1) { edges { node { ${TOOLS} } } } }`);
    expect(one.sessions.edges).toHaveLength(1);
  });
});
