// A "__proto__" key in outside JSON (docs/operations.md "Threat model"):
// JSON.parse and Postgres keep it as data, but the log's codec (zod records
// and JSON values) dropped it, so an event carrying one was stored without it
// and nothing said so. It is refused at every door that takes a payload, as
// BAD_USER_INPUT naming the key; nothing is written, and no prototype is touched.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

/** Outside JSON with a "__proto__" key nested in it, as a client's JSON.parse would hand it on. */
const withProtoKey = () => JSON.parse('{"meta": {"__proto__": {"polluted": true}, "kept": 1}}') as Record<string, unknown>;
const REFUSED = /"__proto__", which would not be kept/;
const HEADER = { format: 'forkline.recording', version: 4, session: { id: 'ses_proto_keys', title: 'proto keys' } };
const sessionCount = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"')).rows[0].n;

describe('a "__proto__" key in an event payload', () => {
  it('is refused in a recording, through POST /recordings and importRecording, naming the line', async () => {
    const recording = [JSON.stringify(HEADER), `{"seq":0,"type":"plugin/notes/add","data":${JSON.stringify(withProtoKey())}}`].join('\n') + '\n';
    expect(recording).toContain('"__proto__"');
    const before = await sessionCount();
    const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
      method: 'POST',
      headers: { 'content-type': 'application/x-ndjson' },
      body: recording,
    });
    expect(res.status).toBe(400);
    const body = (await res.json()) as { errors: Array<{ message: string; extensions: { code: string } }> };
    expect(body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(body.errors[0].message).toMatch(/^line 2: /);
    expect(body.errors[0].message).toMatch(REFUSED);
    const gql = await app.gql('mutation($r: String!) { importRecording(recording: $r) { id } }', { r: recording });
    expect(gql.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(gql.errors?.[0].message).toMatch(REFUSED);
    expect(await sessionCount()).toBe(before);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it("is refused in a runner's batch (appendEvents) and a runner tool's schema (declareRunnerTools), nothing written", async () => {
    const id = (await app.ok('mutation { createSession(input: { title: "runner", runner: "proto-pool" }) { id eventCount } }')).createSession.id as string;
    const claim = await app.ok('mutation($i: ClaimSessionInput!) { claimSession(input: $i) { lease { token } session { eventCount } } }', {
      i: { sessionId: id, runnerId: 'r1' },
    });
    const count = claim.claimSession.session.eventCount as number;
    const appended = await app.gql('mutation($i: AppendEventsInput!) { appendEvents(input: $i) { eventCount } }', {
      i: { sessionId: id, leaseToken: claim.claimSession.lease.token, expectedEventCount: count, events: [{ type: 'plugin/notes/add', data: withProtoKey() }] },
    });
    expect(appended.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(appended.errors?.[0].message).toMatch(REFUSED);
    expect((await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id })).session.eventCount).toBe(count);

    const declared = await app.gql('mutation($i: DeclareRunnerToolsInput!) { declareRunnerTools(input: $i) { id } }', {
      i: {
        sessionId: id,
        leaseToken: claim.claimSession.lease.token,
        tools: [{ name: 'lookup', effect: 'READ_ONLY', inputSchema: { type: 'object', properties: withProtoKey() } }],
      },
    });
    expect(declared.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(declared.errors?.[0].message).toMatch(REFUSED);
    expect((await app.ok('query($id: ID!) { session(id: $id) { eventCount tools { name } } }', { id })).session).toEqual({ eventCount: count, tools: [] });
  });
});
