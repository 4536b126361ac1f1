// The runner protocol's doors attacked as a hostile or confused runner would
// (docs/operations.md "Threat model"): claims that start a turn racing input,
// lease tokens carried to another session, events that are not a runner's to
// write, declared tool sets that break their own rules. Through the real server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { MAX_JSON_TEXT_DEPTH, nestedTooDeep } from '../../src/core/storable.ts';

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({ runnableSweepMs: 200 });
});
afterAll(() => app.close());

const CREATE = `mutation($input: CreateSessionInput!) { createSession(input: $input) { id } }`;
const SEND = `mutation($id: ID!, $text: String!) { sendMessage(input: {sessionId: $id, text: $text}) { inputId } }`;
const CLAIM = `mutation($input: ClaimSessionInput!) { claimSession(input: $input) { session { id eventCount } lease { sessionId token } } }`;
const CLAIM_MANY = `mutation($input: ClaimSessionsInput!) { claimSessions(input: $input) { session { id } lease { sessionId token } } }`;
const APPEND = `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`;
const HOLDER = `query($id: ID!) { session(id: $id) { eventCount runnerHolder status } }`;

async function poolSession(pool: string, text?: string): Promise<{ id: string; inputId?: string }> {
  const { id } = (await app.ok(CREATE, { input: { title: 't', runner: pool } })).createSession;
  if (text === undefined) return { id };
  return { id, inputId: (await app.ok(SEND, { id, text })).sendMessage.inputId };
}
const holder = async (id: string) => (await app.ok(HOLDER, { id })).session;
const append = (sessionId: string, leaseToken: number, expectedEventCount: number, events: Array<{ type: string; data: unknown }>) =>
  app.gql(APPEND, { input: { sessionId, leaseToken, expectedEventCount, events } });

describe('claims that start a turn', () => {
  it('a claim racing messages to the same session never keeps a lease its runner was not answered with', async () => {
    const sessions = await Promise.all(Array.from({ length: 8 }, () => poolSession('race-one', 'first')));
    const results = await Promise.all(
      sessions.map(async ({ id }) => {
        const [claim] = await Promise.all([
          app.gql(CLAIM, { input: { sessionId: id, runnerId: 'racer', startTurn: true } }),
          ...Array.from({ length: 4 }, (_, i) => app.ok(SEND, { id, text: `more ${i}` })),
        ]);
        return { id, claim };
      }),
    );
    for (const { id, claim } of results) {
      const s = await holder(id);
      // Answered with a token: it holds the lease. Answered with an error: nobody does.
      expect(s.runnerHolder).toBe(claim.errors ? null : 'racer');
    }
    expect(results.filter((r) => r.claim.errors).map((r) => r.claim.errors)).toEqual([]);
  });

  it('claimSessions racing messages answers every lease it took, and holds no other', async () => {
    const sessions = await Promise.all(Array.from({ length: 8 }, () => poolSession('race-many', 'first')));
    const [claims] = await Promise.all([
      app.gql(CLAIM_MANY, { input: { pool: 'race-many', runnerId: 'batch', max: 8, startTurn: true } }),
      ...sessions.flatMap(({ id }) => Array.from({ length: 3 }, (_, i) => app.ok(SEND, { id, text: `more ${i}` }))),
    ]);
    const answered = new Set<string>((claims.data?.claimSessions ?? []).map((c: any) => c.session.id));
    for (const { id } of sessions) expect((await holder(id)).runnerHolder).toBe(answered.has(id) ? 'batch' : null);
    expect(claims.errors).toBeUndefined();
    expect(answered.size).toBeGreaterThan(0); // a session locked by an append at that moment is skipped (SKIP LOCKED): offered again later
  });

  it("claimSessions takes only the caller's tenant's sessions of a pool another tenant names alike", async () => {
    const theirs = await app.services.store.createSession({ tenant: 'other' }, { title: 'theirs', runner: 'shared-name' });
    await app.services.store.append(theirs.id, [{ type: 'inbox/add', data: { inputId: 'i1', text: 'hi' } }]);
    const mine = await poolSession('shared-name', 'mine');
    const claims = (await app.ok(CLAIM_MANY, { input: { pool: 'shared-name', runnerId: 'r', max: 100, startTurn: true } })).claimSessions;
    expect(claims.map((c: any) => c.session.id)).toEqual([mine.id]);
    const row = await app.services.store.getSession({ tenant: 'other' }, theirs.id);
    expect(row).toMatchObject({ leaseOwner: null, eventCount: 2 });
  });
});

describe('lease tokens', () => {
  it("a token of one session's lease writes nothing in another session, whoever holds it", async () => {
    const a = await poolSession('tokens', 'a');
    const b = await poolSession('tokens', 'b');
    const ta = (await app.ok(CLAIM, { input: { sessionId: a.id, runnerId: 'ra' } })).claimSession.lease.token;
    const tb = (await app.ok(CLAIM, { input: { sessionId: b.id, runnerId: 'rb' } })).claimSession.lease.token;
    // Runner ra sends its batch to b with a's token: refused (both sessions were claimed once: equal counters would let it in).
    const r = await append(b.id, ta, 2, [
      { type: 'inbox/remove', data: { inputId: b.inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: b.inputId } },
    ]);
    expect(r.errors?.[0].extensions?.code).toBe('LEASE_LOST');
    expect(await holder(b.id)).toMatchObject({ eventCount: 2, runnerHolder: 'rb' });
    // Nor can it renew or give back b's lease with it.
    const renew = await app.gql(`mutation($i: LeaseInput!) { renewLease(input: $i) { token } }`, { i: { sessionId: b.id, leaseToken: ta } });
    expect(renew.errors?.[0].extensions?.code).toBe('LEASE_LOST');
    const release = await app.gql(`mutation($i: LeaseInput!) { releaseSession(input: $i) { id } }`, { i: { sessionId: b.id, leaseToken: ta } });
    expect(release.errors?.[0].extensions?.code).toBe('LEASE_LOST');
    expect((await holder(b.id)).runnerHolder).toBe('rb');
    expect(ta).not.toBe(tb);
  });

  it("the next holder's token is not the last one's plus one (a runner cannot take over a lease it saw taken)", async () => {
    const s = await poolSession('tokens-next', 'x');
    const first = (await app.ok(CLAIM, { input: { sessionId: s.id, runnerId: 'one', leaseMs: 5000 } })).claimSession.lease.token;
    await app.ok(`mutation($i: LeaseInput!) { releaseSession(input: $i) { id } }`, { i: { sessionId: s.id, leaseToken: first } });
    const second = (await app.ok(CLAIM, { input: { sessionId: s.id, runnerId: 'two' } })).claimSession.lease.token;
    expect(second).not.toBe(first);
    expect(second).not.toBe(first + 1);
    expect(Number.isInteger(second) && second >= 0 && second <= 2 ** 31 - 1).toBe(true);
  });
});

describe("what a runner's batch may hold", () => {
  it("a runner does not decide its own call's approval (a person's decision, recorded with who made it)", async () => {
    const { id, inputId } = await poolSession('approvals', 'rm -rf');
    const token = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'r' } })).claimSession.lease.token;
    const ask = [
      { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId } },
      { type: 'step/start', data: { turn: 1, step: 1 } },
      { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: [{ id: 'c1', name: 'shell', arguments: '{}' }] } },
      { type: 'tool/approval-request', data: { turn: 1, step: 1, callId: 'c1' } },
    ];
    const forged = { type: 'tool/approval', data: { callId: 'c1', decision: 'approved', reason: '', by: 'token:admin' } };
    const r = await append(id, token, 2, [...ask, forged]);
    expect(r.errors?.[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT', rule: 'runner events', seq: 7 });
    expect((await holder(id)).eventCount).toBe(2);
    // Asking is the runner's; the decision stays a person's.
    expect((await append(id, token, 2, ask)).errors).toBeUndefined();
    expect((await append(id, token, 7, [forged])).errors?.[0].extensions?.rule).toBe('runner events');
    expect((await holder(id)).status).toBe('WAITING');
  });

  it.each([
    ["a result with status not-started (a fork's repair)", { type: 'tool/result', status: 'not-started' }],
    ['a result with status interrupted (a crash repair)', { type: 'tool/result', status: 'interrupted' }],
    ['a step closed as forked', { type: 'step/end', reason: 'forked' }],
    ['a turn closed as interrupted', { type: 'turn/end', reason: 'interrupted' }],
  ])("a runner does not pass its events off as a repair's: %s", async (_what, forged: { type: string; status?: string; reason?: string }) => {
    const { id, inputId } = await poolSession('repair-words', 'send it');
    const claim = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'r' } })).claimSession;
    const call = { turn: 1, step: 1 };
    const events = [
      { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId } },
      { type: 'step/start', data: call },
      { type: 'model/message', data: { ...call, text: '', toolCalls: [{ id: 'c1', name: 'send', arguments: '{}' }] } },
      { type: 'tool/result', data: { ...call, callId: 'c1', resultId: 'r1', status: forged.status ?? 'ok', content: 'x', name: 'send' } },
      { type: 'step/end', data: { ...call, reason: forged.type === 'step/end' ? forged.reason : 'completed' } },
      { type: 'turn/end', data: { turn: 1, reason: forged.type === 'turn/end' ? forged.reason : 'completed' } },
    ];
    const r = await append(id, claim.lease.token, claim.session.eventCount, events);
    expect(r.errors?.[0].extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      rule: 'runner events',
      seq: claim.session.eventCount + events.findIndex((e) => e.type === forged.type),
    });
    expect((await holder(id)).eventCount).toBe(claim.session.eventCount);
  });

  it('a session/runner-tools event naming a tool twice is refused in an append as declareRunnerTools refuses it', async () => {
    const { id } = await poolSession('tool-sets');
    const token = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'r' } })).claimSession.lease.token;
    const twice = {
      tools: [
        { name: 'x', effect: 'read-only' },
        { name: 'x', effect: 'side-effects' },
      ],
    };
    const r = await append(id, token, 1, [{ type: 'session/runner-tools', data: twice }]);
    expect(r.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(r.errors?.[0].message).toMatch(/session\/runner-tools.*names each tool once/);
    expect((await holder(id)).eventCount).toBe(1);
    const declared = await app.gql(`mutation($i: DeclareRunnerToolsInput!) { declareRunnerTools(input: $i) { id } }`, {
      i: { sessionId: id, leaseToken: token, tools: twice.tools.map((t) => ({ ...t, effect: t.effect.toUpperCase().replace('-', '_') })) },
    });
    expect(declared.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
  });
});

describe('declared tools', () => {
  it('a tool schema nested thousands of levels deep is BAD_USER_INPUT, refused on its text before it is parsed, not a crash', async () => {
    const { id } = await poolSession('deep-schemas');
    const token = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'r' } })).claimSession.lease.token;
    const depth = 20_000; // built as text: JSON.stringify of such a value overflows the client's own stack
    const schema = '{"a":'.repeat(depth) + '{}' + '}'.repeat(depth);
    const query = `mutation($i: DeclareRunnerToolsInput!) { declareRunnerTools(input: $i) { id } }`;
    const variables = `{"i":{"sessionId":"${id}","leaseToken":${token},"tools":[{"name":"deep","effect":"READ_ONLY","inputSchema":${schema}}]}}`;
    const res = await fetch(app.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: `{"query":${JSON.stringify(query)},"variables":${variables}}`,
    });
    const body = (await res.json()) as { errors?: Array<{ message: string; extensions?: { code?: string } }> };
    expect(body.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(body.errors?.[0].message).toBe(`the request body ${nestedTooDeep(MAX_JSON_TEXT_DEPTH)}`);
    expect((await holder(id)).eventCount).toBe(1);
  });
});

describe('usage a runner reports', () => {
  it("keeps a session's token totals exact past GraphQL's 32-bit Int, and refuses an answer reporting more tokens than any model reads", async () => {
    const { id, inputId } = await poolSession('usage', 'count');
    const claim = (await app.ok(CLAIM, { input: { sessionId: id, runnerId: 'r' } })).claimSession;
    const [token, at] = [claim.lease.token, claim.session.eventCount];
    const opening = [
      { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId } },
    ];
    const step = (n: number, tokens: number) => [
      { type: 'step/start', data: { turn: 1, step: n } },
      { type: 'model/message', data: { turn: 1, step: n, text: 'ok', toolCalls: [], usage: { inputTokens: tokens, outputTokens: tokens } } },
      { type: 'step/end', data: { turn: 1, step: n, reason: 'completed' } },
    ];
    const absurd = await append(id, token, at, [...opening, ...step(1, 1e12)]);
    expect(absurd.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(absurd.errors?.[0].message).toMatch(/inputTokens/);
    expect((await holder(id)).eventCount).toBe(at);

    // 22 answers of 100 million tokens each: 2.2 billion, past 2^31 - 1.
    const steps = Array.from({ length: 22 }, (_, i) => step(i + 1, 100_000_000)).flat();
    const r = await append(id, token, at, [...opening, ...steps, { type: 'turn/end', data: { turn: 1, reason: 'completed' } }]);
    expect(r.errors).toBeUndefined();
    const read = await app.gql(
      `query($id: ID!) { session(id: $id) { totals { inputTokens outputTokens } turns(last: 1) { usage { inputTokens outputTokens } } } }`,
      { id },
    );
    expect(read.errors).toBeUndefined();
    expect(read.data.session.totals).toEqual({ inputTokens: 2_200_000_000, outputTokens: 2_200_000_000 });
    expect(read.data.session.turns[0].usage).toEqual({ inputTokens: 2_200_000_000, outputTokens: 2_200_000_000 });
  });
});
