// Structured output at the doors: a message's responseSchema is checked as a
// JSON Schema where it comes in (BAD_USER_INPUT, nothing written), kept with the
// input's inbox/add, carried by editMessage and a fork's message, and handed to
// external runners in Session.modelRequest (the provider wire formats and the
// validation of answers: tests/agent/provider-wire.test.ts).
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { MAX_RESPONSE_SCHEMA_CHARS } from '../../src/core/text-limits.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app?.close();
});

const schema = { type: 'object', properties: { answer: { type: 'string' } }, required: ['answer'] };
const SEND = `mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`;
const log = async (id: string) => app.services.store.log.page(id, -1, 1000);
const runnerSession = async () => (await app.ok(`mutation { createSession(input: { title: "so", runner: "pool-so" }) { id } }`)).createSession.id as string;

describe('responseSchema at the door', () => {
  it('refuses what is not a usable JSON Schema of an object, too large, or a name without a schema: BAD_USER_INPUT, nothing written', async () => {
    const id = await runnerSession();
    const before = (await log(id)).length;
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ responseSchema: { type: 'object', properties: { a: { type: 'nonsense' } } } }, /not a valid JSON Schema/],
      [{ responseSchema: { type: 'string' } }, /root must be an object schema/],
      [{ responseSchema: { type: 'object', $schema: 'http://json-schema.org/draft-04/schema#' } }, /draft-04.*not supported/],
      [{ responseSchema: { type: 'object', properties: { a: { $ref: '#/$defs/missing' } } } }, /not a valid JSON Schema/],
      [{ responseSchema: { type: 'object', description: 'x'.repeat(MAX_RESPONSE_SCHEMA_CHARS) } }, new RegExp(`at most ${MAX_RESPONSE_SCHEMA_CHARS}`)],
      [{ responseSchema: schema, responseSchemaName: 'has spaces' }, /schema name/],
      [{ responseSchemaName: 'alone' }, /responseSchemaName needs a responseSchema/],
      [{ responseSchema: [1, 2] }, /responseSchema/],
    ];
    for (const [fields, says] of cases) {
      const r = await app.gql(SEND, { i: { sessionId: id, text: 'hi', ...fields } });
      expect(r.errors?.[0]?.extensions?.code, JSON.stringify(fields).slice(0, 80)).toBe('BAD_USER_INPUT');
      expect(r.errors?.[0]?.message).toMatch(says);
    }
    expect(await log(id)).toHaveLength(before);
  });

  it('is kept with the input and handed to a runner in Session.modelRequest (and PendingInput)', async () => {
    const id = await runnerSession();
    await app.ok(SEND, { i: { sessionId: id, text: 'answer in JSON', responseSchema: schema, responseSchemaName: 'reply' } });
    const added = (await log(id)).find((e) => e.type === 'inbox/add')!;
    expect(anyData(added).responseFormat).toEqual({ schema, name: 'reply' });
    const s = await app.ok(
      `query($id: ID!) { session(id: $id) { pendingInputs { responseSchema } modelRequest { inputId responseSchema responseSchemaName } } }`,
      { id },
    );
    expect(s.session.pendingInputs).toEqual([{ responseSchema: schema }]);
    expect(s.session.modelRequest).toMatchObject({ responseSchema: schema, responseSchemaName: 'reply' });
    // A message without one asks for none.
    const plain = await runnerSession();
    await app.ok(SEND, { i: { sessionId: plain, text: 'plain' } });
    const p = await app.ok(`query($id: ID!) { session(id: $id) { modelRequest { responseSchema responseSchemaName } } }`, { id: plain });
    expect(p.session.modelRequest).toEqual({ responseSchema: null, responseSchemaName: null });
  });

  it("inside the open turn, the runner's modelRequest still carries the turn's schema", async () => {
    const id = await runnerSession();
    const { sendMessage } = await app.ok(SEND, { i: { sessionId: id, text: 'q', responseSchema: schema } });
    const claim = await app.ok(`mutation($i: ClaimSessionInput!) { claimSession(input: $i) { lease { token } session { eventCount } } }`, {
      i: { sessionId: id, runnerId: 'r1' },
    });
    await app.ok(`mutation($i: AppendEventsInput!) { appendEvents(input: $i) { session { id } } }`, {
      i: {
        sessionId: id,
        leaseToken: claim.claimSession.lease.token,
        expectedEventCount: claim.claimSession.session.eventCount,
        events: [
          { type: 'inbox/remove', data: { inputId: sendMessage.inputId, reason: 'taken' } },
          { type: 'turn/start', data: { turn: 1, inputId: sendMessage.inputId } },
          { type: 'step/start', data: { turn: 1, step: 1 } },
        ],
      },
    });
    const s = await app.ok(`query($id: ID!) { session(id: $id) { modelRequest { inTurn responseSchema } } }`, { id });
    expect(s.session.modelRequest).toEqual({ inTurn: true, responseSchema: schema });
  });

  it("editMessage and a fork's message carry their own schema into the child's inbox/add; a schema without a message is refused", async () => {
    const id = await runnerSession();
    const { sendMessage } = await app.ok(SEND, { i: { sessionId: id, text: 'first' } });
    const edited = await app.ok(`mutation($i: EditMessageInput!) { editMessage(input: $i) { session { id modelRequest { responseSchema } } } }`, {
      i: { sessionId: id, inputId: sendMessage.inputId, text: 'first, as JSON', responseSchema: schema },
    });
    expect(edited.editMessage.session.modelRequest.responseSchema).toEqual(schema);
    const childAdd = (await log(edited.editMessage.session.id)).filter((e) => e.type === 'inbox/add' && !e.inherited);
    expect(childAdd.map((e) => anyData(e).responseFormat)).toEqual([{ schema }]);

    const forked = await app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id pendingInputs { text responseSchema } } } }`, {
      i: { sessionId: id, atSeq: 0, message: 'forked, as JSON', responseSchema: schema, responseSchemaName: 'f' },
    });
    expect(forked.forkSession.session.pendingInputs).toEqual([{ text: 'forked, as JSON', responseSchema: schema }]);

    const refused = await app.gql(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }`, {
      i: { sessionId: id, atSeq: 0, responseSchema: schema },
    });
    expect(refused.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(refused.errors?.[0]?.message).toMatch(/needs a message/);
  });
});
