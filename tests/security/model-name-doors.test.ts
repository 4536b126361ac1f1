// A model's name at every door that takes one (core/input-rules.ts modelNameSchema): GraphQL's ModelConfigInput
// (createSession, setSessionModel, forkSession, fanOut), a recording's session/model (POST /recordings and
// importRecording, written as V4 or V3) and a runner's appendEvents. A name past 200 characters (the most the
// dashboard shows) was stored from a recording or a runner and listed with every session; now each door refuses it
// with the same words, naming the limit, and stores nothing. /chat and POST /agui take no model name: one sent
// along is not stored. An event type past 200 characters (a plugin's, shown as a note) is refused the same way.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { appendEvents, claimedRunnerSession, importRecording, postRecording, sessionCount } from './hostile-doors.ts';

const LIMIT = /a model name is at most 200 characters/;
const TOO_LONG = 'm'.repeat(201);
const LONGEST = 'm'.repeat(200);
const PROVIDER_LIMIT = /a provider name is at most 100 characters/;

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

/** A recording of one session/model event, written as `version`. */
const recordingWith = (version: 3 | 4, data: Record<string, unknown>, type = 'session/model') =>
  [
    { format: 'forkline.recording', version, session: { id: 'ses_model', title: 'model' } },
    { seq: 0, type, data },
  ]
    .map((l) => JSON.stringify(l))
    .join('\n') + '\n';

const modelEvents = async () => (await app.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "Event" WHERE type = 'session/model'`)).rows[0].n;

describe('a model name past 200 characters, at every door', () => {
  it('GraphQL: createSession, setSessionModel, forkSession and fanOut refuse it, naming the limit; 200 is taken', async () => {
    const before = await modelEvents();
    const create = (model: string, provider = 'scripted') =>
      app.gql('mutation($m: ModelConfigInput!) { createSession(input: { title: "m", model: $m }) { id } }', { m: { provider, model } });
    const refused = await create(TOO_LONG);
    expect(refused.errors?.[0]).toMatchObject({ extensions: { code: 'BAD_USER_INPUT' }, message: expect.stringMatching(LIMIT) });
    expect((await create('gpt', 'p'.repeat(101))).errors?.[0].message).toMatch(PROVIDER_LIMIT);
    const id = (await create(LONGEST)).data.createSession.id as string;
    const set = await app.gql('mutation($id: ID!, $m: ModelConfigInput!) { setSessionModel(input: { sessionId: $id, model: $m }) { id } }', {
      id,
      m: { provider: 'scripted', model: TOO_LONG },
    });
    expect(set.errors?.[0].message).toMatch(LIMIT);
    const fork = await app.gql(
      'mutation($id: ID!, $m: ModelConfigInput!) { forkSession(input: { sessionId: $id, atSeq: 0, title: "f", model: $m }) { session { id } } }',
      {
        id,
        m: { provider: 'scripted', model: TOO_LONG },
      },
    );
    expect(fork.errors?.[0].message).toMatch(LIMIT);
    const fan = await app.gql(
      'mutation($id: ID!, $m: ModelConfigInput!) { fanOut(input: { sessionId: $id, atSeq: 0, variants: [{ title: "a", model: $m }, { title: "b" }] }) { children { id } } }',
      {
        id,
        m: { provider: 'scripted', model: TOO_LONG },
      },
    );
    expect(fan.errors?.[0].message).toMatch(LIMIT);
    expect(await modelEvents()).toBe(before + 1); // the 200-character one only
  });

  it('a recording (POST /recordings and importRecording), written as V4 or as V3, is refused whole, naming the limit', async () => {
    const sessions = await sessionCount(app);
    for (const version of [4, 3] as const) {
      const r = await postRecording(app, recordingWith(version, { provider: 'scripted', model: TOO_LONG }));
      expect(r.status, JSON.stringify(r.body)).toBe(400);
      expect(JSON.stringify(r.body)).toMatch(LIMIT);
      const viaGraphQL = await importRecording(app, recordingWith(version, { provider: 'scripted', model: TOO_LONG }));
      expect(viaGraphQL.errors?.[0].message).toMatch(LIMIT);
      const provider = await postRecording(app, recordingWith(version, { provider: 'p'.repeat(101), model: 'gpt' }));
      expect(JSON.stringify(provider.body)).toMatch(PROVIDER_LIMIT);
    }
    expect(await sessionCount(app)).toBe(sessions);
    for (const version of [4, 3] as const)
      expect((await postRecording(app, recordingWith(version, { provider: 'scripted', model: LONGEST }))).status).toBe(201);
  });

  it("a runner's appendEvents is refused, naming the limit, and appends nothing", async () => {
    const s = await claimedRunnerSession(app);
    const refused = await appendEvents(app, s, [{ type: 'session/model', data: { provider: 'scripted', model: TOO_LONG } }]);
    expect(refused.errors?.[0].message).toMatch(LIMIT);
    const count = (await app.ok('query($id: ID!) { session(id: $id) { eventCount } }', { id: s.id })).session.eventCount;
    expect(count).toBe(s.eventCount);
    const taken = await appendEvents(app, s, [{ type: 'session/model', data: { provider: 'scripted', model: LONGEST } }]);
    expect(taken.errors).toBeUndefined();
  });

  it('/chat and POST /agui take no model name: one sent along is not stored', async () => {
    const before = await modelEvents();
    const base = app.url.replace(/\/graphql$/, '');
    const chat = await fetch(`${base}/chat`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ id: 'chat-model', model: TOO_LONG, messages: [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hello' }] }] }),
    });
    expect(chat.status).toBe(200);
    await chat.text();
    const agui = await fetch(`${base}/agui`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'text/event-stream' },
      body: JSON.stringify({
        threadId: 'agui-model',
        runId: 'run-1',
        state: { model: TOO_LONG },
        tools: [],
        context: [],
        forwardedProps: { model: TOO_LONG, provider: 'scripted' },
        messages: [{ id: 'm1', role: 'user', content: 'hello' }],
      }),
    });
    expect(agui.status).toBe(200);
    await agui.text();
    await app.services.host.idle();
    expect(await modelEvents()).toBe(before);
  });
});

describe('an event type past 200 characters', () => {
  it('is refused from a recording and from a runner, naming the limit (a plugin event is shown by its type)', async () => {
    const type = `plugin/hostile/${'t'.repeat(200)}`;
    const r = await postRecording(app, recordingWith(4, { note: 'x' }, type));
    expect(r.status).toBe(400);
    expect(JSON.stringify(r.body)).toMatch(/an event type is at most 200 characters/);
    const s = await claimedRunnerSession(app);
    const refused = await appendEvents(app, s, [{ type, data: {} }]);
    expect(refused.errors?.[0].message).toMatch(/200/);
  });
});
