// Branching workflows through GraphQL over HTTP and the production
// agent loop: editMessage, forkSession/branchSession with a model and a message,
// fanOut with Session.children / siblings / lastAnswer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(async () => {
  await app.close();
});

const PAYLOAD = `cutSeq inputId session { id title status firstLiveSeq inheritedEventCount forkedAtSeq parent { id } } parent { id } syntheticEvents { seq type data synthetic }`;
const EDIT = `mutation($i: EditMessageInput!, $k: String) { editMessage(input: $i, idempotencyKey: $k) { ${PAYLOAD} } }`;
const FORK = `mutation($i: ForkSessionInput!) { forkSession(input: $i) { ${PAYLOAD} } }`;
const BRANCH = `mutation($i: BranchSessionInput!) { branchSession(input: $i) { ${PAYLOAD} } }`;
const FAN_OUT = `mutation($i: FanOutInput!, $k: String) { fanOut(input: $i, idempotencyKey: $k) {
  cutSeq parent { id } children { id title firstLiveSeq forkedAtSeq parent { id } }
} }`;
const LISTING = `query($id: ID!) { session(id: $id) { children(first: 50) { edges { node {
  id title status eventCount lastAnswer { seq turn text toolCallCount inherited usage { inputTokens outputTokens } }
} } } } }`;

const create = async (model?: string, title?: string) =>
  (
    await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, {
      i: { title, model: model ? { provider: 'scripted', model } : undefined },
    })
  ).createSession.id as string;
const send = async (id: string, text: string) =>
  (await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } })).sendMessage.inputId as string;
const log = (id: string) => app.services.store.log.page(id, -1, 10_000);
const recording = async (id: string) => (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id })).session.recording as string;
const idle = () => app.services.host.idle();
const userTexts = () => app.models.scripted.lastRequest!.messages.filter((m) => m.role === 'user').map((m) => (m as { content: string }).content);
/** An event as the child and the parent share it: same seq, type and data. */
const shape = (e: { seq: number; type: string; data: unknown }) => [e.seq, e.type, e.data];
const toolRunning = (id: string) => new Promise<void>((resolve) => app.turnUpdates.on(id, (u: TurnUpdate) => u.kind === 'TOOL_RUNNING' && resolve()));

describe('editMessage', () => {
  it('forks right before the input in the middle of a three-turn session and re-runs from there', async () => {
    const p = await create('m1', 'three turns');
    await send(p, 'A');
    await idle();
    const b = await send(p, 'B');
    await idle();
    await send(p, 'C');
    await idle();
    const before = await recording(p);
    const parentLog = await log(p);
    const bAdd = parentLog.find((e) => e.type === 'inbox/add' && anyData(e).inputId === b)!;

    const { editMessage: r } = await app.ok(EDIT, { i: { sessionId: p, inputId: b, text: 'B, edited' } });
    expect(r.cutSeq).toBe(bAdd.seq - 1);
    expect(r.syntheticEvents).toEqual([]); // turn 1 was closed there: nothing to close
    expect(r.session).toMatchObject({
      title: 'three turns',
      forkedAtSeq: bAdd.seq - 1,
      inheritedEventCount: bAdd.seq,
      firstLiveSeq: bAdd.seq + 1,
      parent: { id: p },
    });
    expect(r.inputId).toMatch(/^in_/);
    expect(r.inputId).not.toBe(b);
    await idle();

    const child = await log(r.session.id);
    // The exact prefix before B's inbox/add, inherited …
    expect(child.slice(0, bAdd.seq).map(shape)).toEqual(parentLog.slice(0, bAdd.seq).map(shape));
    expect(child.slice(0, bAdd.seq).every((e) => e.inherited)).toBe(true);
    // … the marker, then the new input, then the child's own turn 2 answering it.
    expect(child.slice(bAdd.seq, bAdd.seq + 2).map(shape)).toEqual([
      [bAdd.seq, 'session/end-seed', { parentSessionId: p, cutSeq: bAdd.seq - 1, inheritedEventCount: bAdd.seq }],
      [bAdd.seq + 1, 'inbox/add', { inputId: r.inputId, text: 'B, edited' }],
    ]);
    expect(child.slice(bAdd.seq + 2).map((e) => e.type)).toEqual(['inbox/remove', 'turn/start', 'step/start', 'model/message', 'step/end', 'turn/end']);
    expect(child.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
    expect(child.some((e) => e.type === 'inbox/add' && (anyData(e).text === 'B' || anyData(e).text === 'C'))).toBe(false);

    // The next model request: the edited text and nothing after the cut, with the model of the prefix.
    expect(app.models.scripted.lastRequest).toMatchObject({ provider: 'scripted', model: 'm1' });
    expect(app.models.scripted.lastRequest!.messages).toEqual([
      { role: 'user', content: 'A' },
      { role: 'assistant', content: 'Echo: A' },
      { role: 'user', content: 'B, edited' },
    ]);
    // The original is unchanged, byte for byte.
    expect(await recording(p)).toBe(before);
  });

  it('closes what was open right before the input (sent while a tool ran), with cause forked', async () => {
    const p = await create('m1');
    const running = toolRunning(p);
    await send(p, 'A\n!call sleep {"ms": 800}');
    await running;
    const b = await send(p, 'B'); // lands inside turn 1's open step
    await idle();
    await send(p, 'C');
    await idle();
    const before = await recording(p);
    const parentLog = await log(p);
    const bAdd = parentLog.find((e) => e.type === 'inbox/add' && anyData(e).inputId === b)!;
    const turn1End = parentLog.find((e) => e.type === 'turn/end' && anyData(e).turn === 1)!;
    expect(bAdd.seq).toBeLessThan(turn1End.seq);

    const { editMessage: r } = await app.ok(EDIT, {
      i: { sessionId: p, inputId: b, text: 'B2', title: 'edited', model: { provider: 'scripted', model: 'm2' } },
    });
    const cut = bAdd.seq - 1;
    expect(r.cutSeq).toBe(cut);
    expect(r.syntheticEvents.map((e: any) => [e.type, e.data.status ?? e.data.reason])).toEqual([
      ['tool/result', 'not-started'],
      ['step/end', 'forked'],
      ['turn/end', 'forked'],
    ]);
    expect(r.syntheticEvents[0].data.content).toContain(`forked at event ${cut} of session ${p}`);
    await idle();

    const child = await log(r.session.id);
    const closers = r.syntheticEvents.length;
    expect(child.slice(0, cut + 1).map(shape)).toEqual(parentLog.slice(0, cut + 1).map(shape));
    expect(child.slice(cut + 1, cut + 2 + closers).map((e) => [e.type, e.synthetic])).toEqual([
      ['session/end-seed', false],
      ['tool/result', true],
      ['step/end', true],
      ['turn/end', true],
    ]);
    // Then the title, the model and the input, before the child's agent wrote anything.
    expect(child.slice(r.session.firstLiveSeq, r.session.firstLiveSeq + 3).map((e) => [e.type, e.data])).toEqual([
      ['session/title', { title: 'edited' }],
      ['session/model', { provider: 'scripted', model: 'm2' }],
      ['inbox/add', { inputId: r.inputId, text: 'B2' }],
    ]);
    expect(child.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
    expect(app.models.scripted.lastRequest).toMatchObject({ model: 'm2' });
    expect(userTexts()).toEqual(['A\n!call sleep {"ms": 800}', 'B2']);
    const toolMessages = app.models.scripted.lastRequest!.messages.filter((m) => m.role === 'tool');
    expect(toolMessages).toHaveLength(1);
    expect((toolMessages[0] as { content: string }).content).toContain(`forked at event ${cut}`);
    expect(await recording(p)).toBe(before);
  });

  it('editing the first event of a log cuts at -1: the child holds its marker and the new input', async () => {
    const p = await create(); // no title, no model: the input is seq 0
    const a = await send(p, 'A');
    await idle();
    const { editMessage: r } = await app.ok(EDIT, { i: { sessionId: p, inputId: a, text: 'A2' } });
    expect(r.cutSeq).toBe(-1);
    await idle();
    const child = await log(r.session.id);
    expect(child.slice(0, 2).map(shape)).toEqual([
      [0, 'session/end-seed', { parentSessionId: p, cutSeq: -1, inheritedEventCount: 0 }],
      [1, 'inbox/add', { inputId: r.inputId, text: 'A2' }],
    ]);
    expect(child.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 1, reason: 'completed' } });
    expect(app.models.scripted.lastRequest!.messages).toEqual([{ role: 'user', content: 'A2' }]);
  });

  it('an input of a fork that lies in its inherited prefix can be edited too', async () => {
    const p = await create('m1');
    const a = await send(p, 'A');
    await idle();
    await send(p, 'B');
    await idle();
    const { forkSession: f } = await app.ok(FORK, { i: { sessionId: p } });
    const { editMessage: r } = await app.ok(EDIT, { i: { sessionId: f.session.id, inputId: a, text: 'A3' } });
    expect(r.parent.id).toBe(f.session.id);
    expect(r.cutSeq).toBe((await log(p)).find((e) => e.type === 'inbox/add' && anyData(e).inputId === a)!.seq - 1);
    await idle();
    expect(userTexts()).toEqual(['A3']);
  });

  it('an unknown input is BAD_USER_INPUT naming it; no child is created', async () => {
    const p = await create('m1');
    await send(p, 'A');
    await idle();
    const other = await create('m1');
    const foreign = await send(other, 'elsewhere');
    await idle();
    for (const inputId of ['in_nope', foreign]) {
      const r = await app.gql(EDIT, { i: { sessionId: p, inputId, text: 'x' } });
      expect(r.status).toBeLessThan(500);
      expect(r.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
      expect(r.errors?.[0].message).toContain(inputId);
    }
    const { session } = await app.ok(LISTING, { id: p });
    expect(session.children.edges).toEqual([]);
    const missing = await app.gql(EDIT, { i: { sessionId: 'ses_missing', inputId: 'in_x', text: 'x' } });
    expect(missing.errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
    const empty = await app.gql(EDIT, { i: { sessionId: p, inputId: 'in_x', text: '' } });
    expect(empty.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
  });

  it('is idempotent with a key: a retry gets the same child', async () => {
    const p = await create('m1');
    const a = await send(p, 'A');
    await idle();
    const vars = { i: { sessionId: p, inputId: a, text: 'again' }, k: `edit-${p}` };
    const first = (await app.ok(EDIT, vars)).editMessage;
    const retry = (await app.ok(EDIT, vars)).editMessage;
    expect(retry.session.id).toBe(first.session.id);
    expect(retry.inputId).toBe(first.inputId);
    await idle();
    const { session } = await app.ok(LISTING, { id: p });
    expect(session.children.edges).toHaveLength(1);
  });
});

describe('forkSession and branchSession with a model and a message', () => {
  it('the seed carries them and the child answers at once, with that model', async () => {
    const p = await create('m1', 'parent');
    await send(p, 'A');
    await idle();
    const turnEnd = (await log(p)).find((e) => e.type === 'turn/end')!.seq;

    const { forkSession: f } = await app.ok(FORK, {
      i: { sessionId: p, atSeq: turnEnd, title: 'on m9', model: { provider: 'scripted', model: 'm9', settings: { temperature: 0 } }, message: 'hello' },
    });
    expect(f.inputId).toMatch(/^in_/);
    await idle();
    expect(app.models.scripted.lastRequest).toMatchObject({ provider: 'scripted', model: 'm9' });
    expect(app.models.scripted.lastRequest!.messages.at(-1)).toEqual({ role: 'user', content: 'hello' });
    const child = await log(f.session.id);
    expect(child.slice(f.session.firstLiveSeq - 1, f.session.firstLiveSeq + 3).map((e) => [e.type, e.data])).toEqual([
      ['session/end-seed', { parentSessionId: p, cutSeq: turnEnd, inheritedEventCount: turnEnd + 1 }],
      ['session/title', { title: 'on m9' }],
      ['session/model', { provider: 'scripted', model: 'm9', settings: { temperature: 0 } }],
      ['inbox/add', { inputId: f.inputId, text: 'hello' }],
    ]);
    expect(child.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });

    await app.ok(`mutation($id: ID!) { setSessionModel(sessionId: $id, model: { provider: "scripted", model: "m5" }) { id } }`, { id: p });
    const { branchSession: b } = await app.ok(BRANCH, { i: { sessionId: p, model: { provider: 'scripted', model: 'm8' }, message: 'hi' } });
    expect(b.cutSeq).toBe(turnEnd);
    await idle();
    expect(app.models.scripted.lastRequest).toMatchObject({ model: 'm8' });
    expect(app.models.scripted.lastRequest!.messages).toEqual([
      { role: 'user', content: 'A' },
      { role: 'assistant', content: 'Echo: A' },
      { role: 'user', content: 'hi' },
    ]);
    const branchLog = await log(b.session.id);
    expect(branchLog.some((e) => e.type === 'session/model' && anyData(e).model === 'm5')).toBe(false);

    // A message alone: the model in force at the cut answers it.
    const { forkSession: plain } = await app.ok(FORK, { i: { sessionId: p, atSeq: turnEnd, message: 'plain' } });
    await idle();
    expect(app.models.scripted.lastRequest).toMatchObject({ model: 'm1' });
    expect((await log(plain.session.id)).at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
  });

  it('rejects an unknown provider and an empty message; without overrides nothing changes', async () => {
    const p = await create('m1');
    const bad = await app.gql(FORK, { i: { sessionId: p, atSeq: 0, model: { provider: 'nope', model: 'x' } } });
    expect(bad.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(bad.errors?.[0].message).toContain('nope');
    const empty = await app.gql(BRANCH, { i: { sessionId: p, message: '' } });
    expect(empty.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    const { forkSession: f } = await app.ok(FORK, { i: { sessionId: p, atSeq: 0 } });
    expect(f.inputId).toBeNull();
    expect((await log(f.session.id)).map((e) => e.type)).toEqual(['session/model', 'session/end-seed']);
  });
});

describe('fanOut', () => {
  /** Turn 1 calls the clock, then answers: forks at its tool call are mid-turn. */
  async function toolParent() {
    const p = await create('m0', 'fan');
    await send(p, 'A\n!call clock {}');
    await idle();
    const parentLog = await log(p);
    const callSeq = parentLog.find((e) => e.type === 'model/message' && anyData(e).toolCalls.length === 1)!.seq;
    return { p, parentLog, callSeq };
  }

  it('4 variants from a mid-turn seq: 4 children with their own closers and input, all finish; listed with status and answers', async () => {
    const { p, parentLog, callSeq } = await toolParent();
    const before = await recording(p);
    const variants = [
      { message: 'v1', model: { provider: 'scripted', model: 'm1' }, title: 'one' },
      { message: 'v2', model: { provider: 'scripted', model: 'm2' }, title: 'two' },
      { message: 'v3', model: { provider: 'scripted', model: 'm3' } },
      { message: 'v4' },
    ];
    const requestsBefore = app.models.scripted.requestCount;
    const { fanOut: r } = await app.ok(FAN_OUT, { i: { sessionId: p, atSeq: callSeq, variants } });
    expect(r.cutSeq).toBe(callSeq);
    expect(r.parent.id).toBe(p);
    expect(r.children).toHaveLength(4);
    expect(new Set(r.children.map((c: any) => c.id)).size).toBe(4);
    expect(r.children.map((c: any) => c.title)).toEqual(['one', 'two', 'fan', 'fan']);
    await idle();
    expect(app.models.scripted.requestCount - requestsBefore).toBe(4);
    const models = app.models.scripted.recentRequests.slice(-4).map((q) => [(q.messages.at(-1) as { content: string }).content, q.model]);
    expect(new Map(models as [string, string][])).toEqual(
      new Map([
        ['v1', 'm1'],
        ['v2', 'm2'],
        ['v3', 'm3'],
        ['v4', 'm0'],
      ]),
    );

    for (const [i, c] of r.children.entries()) {
      const child = await log(c.id);
      expect(c).toMatchObject({ forkedAtSeq: callSeq, parent: { id: p }, firstLiveSeq: callSeq + 5 });
      expect(child.slice(0, callSeq + 1).map(shape)).toEqual(parentLog.slice(0, callSeq + 1).map(shape));
      // Its own marker and closers (the clock call was unanswered at the cut) …
      expect(
        child.slice(callSeq + 1, callSeq + 5).map((e) => [e.seq, e.type, anyData(e).status ?? anyData(e).reason ?? null, e.synthetic, e.inherited]),
      ).toEqual([
        [callSeq + 1, 'session/end-seed', null, false, false],
        [callSeq + 2, 'tool/result', 'not-started', true, false],
        [callSeq + 3, 'step/end', 'forked', true, false],
        [callSeq + 4, 'turn/end', 'forked', true, false],
      ]);
      // … then its own input, answered in its own turn 2.
      const add = child.find((e) => e.seq >= c.firstLiveSeq && e.type === 'inbox/add')!;
      expect(anyData(add).text).toBe(`v${i + 1}`);
      expect(child.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
    }

    const { session } = await app.ok(LISTING, { id: p });
    const listed = session.children.edges.map((e: any) => e.node);
    expect(listed.map((n: any) => n.id)).toEqual(r.children.map((c: any) => c.id));
    expect(listed.map((n: any) => [n.status, n.lastAnswer.text, n.lastAnswer.turn, n.lastAnswer.inherited])).toEqual([
      ['IDLE', 'Echo: v1', 2, false],
      ['IDLE', 'Echo: v2', 2, false],
      ['IDLE', 'Echo: v3', 2, false],
      ['IDLE', 'Echo: v4', 2, false],
    ]);
    // What the provider reported for each answer (the scripted model counts words: "Echo: vN" is 2 out).
    for (const n of listed) expect(n.lastAnswer.usage).toEqual({ inputTokens: expect.any(Number), outputTokens: 2 });

    const { session: first } = await app.ok(
      `query($id: ID!) { session(id: $id) { siblings(first: 10) { edges { node { id status lastAnswer { text } } } } } }`,
      { id: r.children[0].id },
    );
    expect(first.siblings.edges.map((e: any) => e.node.id)).toEqual(r.children.slice(1).map((c: any) => c.id));
    expect(first.siblings.edges.map((e: any) => e.node.lastAnswer.text)).toEqual(['Echo: v2', 'Echo: v3', 'Echo: v4']);
    const { session: root } = await app.ok(`query($id: ID!) { session(id: $id) { siblings { edges { node { id } } } lastAnswer { text inherited } } }`, {
      id: p,
    });
    expect(root.siblings.edges).toEqual([]);
    expect(root.lastAnswer.text).toMatch(/^Done/);
    expect(await recording(p)).toBe(before);
  });

  it("an anchor branches every child through a turn/end; without a message a child waits idle with the parent's answer", async () => {
    const { p, callSeq } = await toolParent();
    const { fanOut: r } = await app.ok(FAN_OUT, { i: { sessionId: p, anchorSeq: callSeq, variants: [{ title: 'quiet' }, { message: 'go' }] } });
    const turnEnd = (await log(p)).find((e) => e.type === 'turn/end')!.seq;
    expect(r.cutSeq).toBe(turnEnd);
    await idle();
    const { session } = await app.ok(LISTING, { id: p });
    const [quiet, go] = session.children.edges.map((e: any) => e.node);
    expect(quiet).toMatchObject({ title: 'quiet', status: 'IDLE', lastAnswer: { inherited: true, turn: 1 } });
    expect(go).toMatchObject({ status: 'IDLE', lastAnswer: { text: 'Echo: go', inherited: false } });
  });

  it('is idempotent with a key', async () => {
    const { p, callSeq } = await toolParent();
    const vars = { i: { sessionId: p, atSeq: callSeq, variants: [{ message: 'x' }, { message: 'y' }] }, k: `fan-${p}` };
    const first = (await app.ok(FAN_OUT, vars)).fanOut;
    const retry = (await app.ok(FAN_OUT, vars)).fanOut;
    expect(retry.children.map((c: any) => c.id)).toEqual(first.children.map((c: any) => c.id));
    await idle();
    const { session } = await app.ok(LISTING, { id: p });
    expect(session.children.edges).toHaveLength(2);
  });

  it('validation: 1..16 variants, atSeq or anchorSeq, known providers, a cut in range; nothing is written on error', async () => {
    const { p, callSeq } = await toolParent();
    const cases: Array<[string, Record<string, unknown>, string, RegExp]> = [
      ['no variants', { atSeq: callSeq, variants: [] }, 'BAD_USER_INPUT', /variants/],
      ['17 variants', { atSeq: callSeq, variants: Array.from({ length: 17 }, (_, i) => ({ message: `m${i}` })) }, 'BAD_USER_INPUT', /variants/],
      ['atSeq and anchorSeq', { atSeq: callSeq, anchorSeq: callSeq, variants: [{ message: 'x' }] }, 'BAD_USER_INPUT', /atSeq or anchorSeq, not both/],
      ['unknown provider', { variants: [{ message: 'x' }, { model: { provider: 'nope', model: 'x' } }] }, 'BAD_USER_INPUT', /nope/],
      ['empty message', { variants: [{ message: '' }] }, 'BAD_USER_INPUT', /message/],
      ['seq out of range', { atSeq: 10_000, variants: [{ message: 'x' }] }, 'SEQ_OUT_OF_RANGE', /10000/],
    ];
    for (const [name, input, code, message] of cases) {
      const r = await app.gql(FAN_OUT, { i: { sessionId: p, ...input } });
      expect(r.status, name).toBeLessThan(500);
      expect(r.errors?.[0].extensions?.code, name).toBe(code);
      expect(r.errors?.[0].message, name).toMatch(message);
    }
    const missing = await app.gql(FAN_OUT, { i: { sessionId: 'ses_missing', variants: [{ message: 'x' }] } });
    expect(missing.errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
    const { session } = await app.ok(LISTING, { id: p });
    expect(session.children.edges).toEqual([]);
    // 16 is allowed.
    const { fanOut: r } = await app.ok(FAN_OUT, { i: { sessionId: p, variants: Array.from({ length: 16 }, (_, i) => ({ title: `t${i}` })) } });
    expect(r.children).toHaveLength(16);
  });
});
