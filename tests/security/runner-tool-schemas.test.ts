// The tools an external runner declares (session/runner-tools; docs/runners.md)
// are offered to the model like an MCP server's, and sent with every model
// request of the session (Session.modelRequest, Session.tools). An MCP
// server's tool schema is at most 65,536 characters of JSON and 32 levels
// deep (a larger one leaves the tool out); a runner's was bounded only by the
// body it came in, so one declaration of a 10 MB schema rode along with every
// request. The same rule now holds at each door a declaration enters by.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { appendEvents, claimedRunnerSession, DECLARE_RUNNER_TOOLS, postRecording, sessionCount } from './hostile-doors.ts';
import { MAX_TOOL_SCHEMA_CHARS, MAX_TOOL_SCHEMA_DEPTH } from '../../src/core/tools.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

/** A schema of about `chars` characters of JSON. */
const wide = (chars: number) => ({ type: 'object', description: 'd'.repeat(chars) });
const deep = (levels: number): object => (levels === 0 ? { type: 'string' } : { type: 'object', properties: { a: deep(levels - 1) } });
const BIG = wide(2_000_000);

describe("a runner's declared tool schema", () => {
  it('past the MCP bound is refused by declareRunnerTools, naming it; one within it is declared', async () => {
    const s = await claimedRunnerSession(app);
    const declare = (inputSchema: object) =>
      app.gql(DECLARE_RUNNER_TOOLS, { input: { sessionId: s.id, leaseToken: s.token, tools: [{ name: 'big', effect: 'READ_ONLY', inputSchema }] } });
    const refused = await declare(BIG);
    expect(refused.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(refused.errors?.[0].message).toContain(`characters (at most ${MAX_TOOL_SCHEMA_CHARS})`);
    const tooDeep = await declare(deep(MAX_TOOL_SCHEMA_DEPTH + 1));
    expect(tooDeep.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect((await declare(wide(MAX_TOOL_SCHEMA_CHARS - 100))).errors).toBeUndefined();
  });

  it("past the bound is refused in a runner's appendEvents and in a recording; nothing is written", async () => {
    const s = await claimedRunnerSession(app);
    const set = { type: 'session/runner-tools', data: { tools: [{ name: 'big', effect: 'read-only', inputSchema: BIG }] } };
    const refused = await appendEvents(app, s, [set]);
    expect(refused.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(refused.errors?.[0].message).toContain(`(at most ${MAX_TOOL_SCHEMA_CHARS})`);
    expect((await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: s.id })).session.eventCount).toBe(s.eventCount);

    const before = await sessionCount(app);
    const lines = [
      { format: 'forkline.recording', version: 4, session: { id: 'ses_tools', title: 'tools', runner: 'ext' } },
      { seq: 0, ...set },
    ];
    const r = await postRecording(app, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
    expect(r.status).toBe(400);
    expect(r.body.errors[0].message).toMatch(/^line 2: .*at most 65536/);
    expect(await sessionCount(app)).toBe(before);
  });
});
