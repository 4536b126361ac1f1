// Turn-level branches (docs/contract.md#branch) through the production loop.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { LeaseStore } from '../../src/store/leases.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;
/** Leases as another process holds them. */
let leases: LeaseStore;
beforeAll(async () => {
  app = await startTestApp();
  leases = new LeaseStore(app.db.pool, 'another-process', 60_000);
});
afterAll(async () => {
  await app.close();
});

const BRANCH = `mutation($i: BranchSessionInput!) { branchSession(input: $i) { cutSeq session { id title firstLiveSeq inheritedEventCount } parent { id } syntheticEvents { seq } } }`;
const create = async (title = 'parent', model = 'm1') =>
  (
    await app.ok(`mutation($t: String, $m: String!) { createSession(input: { title: $t, model: { provider: "scripted", model: $m } }) { id } }`, {
      t: title,
      m: model,
    })
  ).createSession.id as string;
const send = async (id: string, text: string) =>
  (await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } })).sendMessage.inputId as string;
const log = (id: string) => app.services.store.log.page(id, -1, 10_000);
const idle = () => app.services.host.idle();
const branch = async (sessionId: string, anchorSeq?: number, title?: string) => (await app.ok(BRANCH, { i: { sessionId, anchorSeq, title } })).branchSession;

/** Parent: turn 1 answers A, then B is answered in turn 2. */
async function answeredParent() {
  const id = await create();
  await send(id, 'A');
  await idle();
  await send(id, 'B');
  await idle();
  return id;
}

/** Parent: turn 1 answers A, then B waits in the inbox (another process holds the session). */
async function queuedParent() {
  const id = await create();
  await send(id, 'A');
  await idle();
  const lease = (await leases.claim(id))!;
  await send(id, 'B');
  await idle();
  return { id, release: () => leases.release(lease) };
}

/** Branch, send C to the child, and check it holds A's turn and C's turn only. */
async function expectBranchExcludesB(parentId: string, anchorSeq: number | undefined) {
  const parentLog = await log(parentId);
  const turn1End = parentLog.find((e) => e.type === 'turn/end' && anyData(e).turn === 1)!;
  const b = await branch(parentId, anchorSeq);
  expect(b.cutSeq).toBe(turn1End.seq);
  expect(b.session.inheritedEventCount).toBe(turn1End.seq + 1);
  expect(b.syntheticEvents).toEqual([]); // a closed turn needs no closers
  const child = b.session.id;
  const before = app.models.scripted.requestCount;
  await send(child, 'C');
  await idle();
  expect(app.models.scripted.requestCount - before).toBe(1);
  expect(app.models.scripted.lastRequest!.messages).toEqual([
    { role: 'user', content: 'A' },
    { role: 'assistant', content: 'Echo: A' },
    { role: 'user', content: 'C' },
  ]);
  const childLog = await log(child);
  const texts = childLog.filter((e) => e.type === 'inbox/add').map((e) => anyData(e).text);
  expect(texts).toEqual(['A', 'C']);
  expect(childLog.filter((e) => e.type === 'turn/start').map((e) => anyData(e).turn)).toEqual([1, 2]);
  expect(childLog.some((e) => JSON.stringify(e.data).includes('"B"'))).toBe(false);
  expect(childLog.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
  return { child, childLog };
}

describe('branchSession selects the first turn/end at or after the anchor', () => {
  it('message anchor (the user input of turn 1)', async () => {
    const p = await answeredParent();
    const anchor = (await log(p)).find((e) => e.type === 'inbox/add' && anyData(e).text === 'A')!.seq;
    await expectBranchExcludesB(p, anchor);
  });

  it('message anchor (the assistant answer of turn 1)', async () => {
    const p = await answeredParent();
    const anchor = (await log(p)).find((e) => e.type === 'model/message')!.seq;
    await expectBranchExcludesB(p, anchor);
  });

  it('the closing-event anchor', async () => {
    const p = await answeredParent();
    const anchor = (await log(p)).find((e) => e.type === 'turn/end')!.seq;
    await expectBranchExcludesB(p, anchor);
  });

  it('omitted anchor on a parent whose last turn is turn 1 plus a queued B', async () => {
    const { id, release } = await queuedParent();
    const parentLog = await log(id);
    expect(parentLog.at(-1)).toMatchObject({ type: 'inbox/add', data: { text: 'B' } });
    await expectBranchExcludesB(id, undefined);
    await release();
  });

  it('past-end anchor on a parent whose last turn is turn 1 plus a queued B', async () => {
    const { id, release } = await queuedParent();
    await expectBranchExcludesB(id, 10_000);
    await release();
  });

  it('a cold source (imported recording) gives the same child as the live one', async () => {
    const p = await answeredParent();
    const { session } = await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id: p });
    const { importRecording: cold } = await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: session.recording });
    const anchor = (await log(cold.id)).find((e) => e.type === 'model/message')!.seq;
    const live = await expectBranchExcludesB(p, anchor);
    const fromCold = await expectBranchExcludesB(cold.id, anchor);
    const shape = (es: any[]) => es.map((e) => [e.seq, e.type, e.inherited, e.synthetic]);
    expect(shape(fromCold.childLog)).toEqual(shape(live.childLog));
  });

  it('a log without any turn/end gives a child holding only the marker', async () => {
    const id = await create('empty');
    const b = await branch(id);
    expect(b.cutSeq).toBe(-1);
    const childLog = await log(b.session.id);
    expect(childLog.map((e) => [e.seq, e.type, e.data])).toEqual([[0, 'session/end-seed', { parentSessionId: id, cutSeq: -1, inheritedEventCount: 0 }]]);
  });
});

describe('what a branch inherits', () => {
  it('a session/model change after the selected turn is not inherited', async () => {
    const p = await create('configured', 'm1');
    await send(p, 'A');
    await idle();
    await app.ok(`mutation($id: ID!) { setSessionModel(sessionId: $id, model: { provider: "scripted", model: "m2" }) { id } }`, { id: p });
    const b = await branch(p);
    await send(b.session.id, 'C');
    await idle();
    expect(app.models.scripted.lastRequest).toMatchObject({ provider: 'scripted', model: 'm1' });
    expect((await log(b.session.id)).some((e) => e.type === 'session/model' && anyData(e).model === 'm2')).toBe(false);
    // the parent itself now uses m2
    await send(p, 'D');
    await idle();
    expect(app.models.scripted.lastRequest).toMatchObject({ model: 'm2' });
  });

  it('a session/title after the selected turn is not inherited; the mutation may name the child', async () => {
    const p = await create('original title');
    await send(p, 'A');
    await idle();
    await app.ok(`mutation($id: ID!) { setSessionTitle(sessionId: $id, title: "later title") { id } }`, { id: p });
    expect((await branch(p)).session.title).toBe('original title');
    const named = await branch(p, undefined, 'my branch');
    expect(named.session.title).toBe('my branch');
    expect((await log(named.session.id)).at(-1)).toMatchObject({ type: 'session/title', data: { title: 'my branch' } });
  });
});

describe('a live source', () => {
  it('branching while the parent runs turn 2 never copies turn 2 events', async () => {
    const p = await create('live');
    await send(p, 'A');
    await idle();
    const running = new Promise<void>((resolve) => app.turnUpdates.on(p, (u: TurnUpdate) => u.kind === 'TOOL_RUNNING' && resolve()));
    await send(p, 'B\n!call sleep {"ms": 1500}');
    await running;
    const mid = (await log(p)).at(-1)!.seq; // an anchor inside turn 2
    for (const anchor of [undefined, mid]) {
      const b = await branch(p, anchor);
      const childLog = await log(b.session.id);
      expect(childLog.some((e) => e.type === 'turn/start' && anyData(e).turn === 2)).toBe(false);
      expect(childLog.filter((e) => e.type === 'inbox/add').map((e) => anyData(e).text)).toEqual(['A']);
      expect(childLog.at(-1)!.type).toBe('session/end-seed');
    }
    await idle();
    expect((await log(p)).at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2, reason: 'completed' } });
  });
});
