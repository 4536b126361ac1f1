// The workspace that rewinds with the log: note_write records its
// write in the log (a plugin/workspace/write event in the same append as its ok
// tool/result), note_read answers from the log as of now, inherited writes
// included. Through GraphQL and the production agent loop with the scripted
// model. (A crash during a write: tests/process/crash-recovery.test.ts; the
// cost on a long log: tests/graphql/read-cost.test.ts.)
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { reclaimed } from '../helpers/reclaimed.ts';
import type { TurnUpdate } from '../../src/agent/turn-updates.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ toolTimeoutMs: 5000 }); // a note_write into a full store reads its 1,000 keys: 1.5 s was not enough on a loaded machine
});
afterAll(async () => {
  await app.close();
});

const FORK = `mutation($i: ForkSessionInput!) { forkSession(input: $i) { cutSeq session { id firstLiveSeq } syntheticEvents { seq type data } } }`;
const WORKSPACE = `query($id: ID!) { session(id: $id) { workspace { key value seq } } }`;

const create = async (title = 'workspace') => (await app.ok(`mutation { createSession(input: { title: "${title}" }) { id } }`)).createSession.id as string;
const send = async (id: string, text: string) =>
  (await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } })).sendMessage.inputId as string;
const idle = () => app.services.host.idle();
const log = (id: string) => app.services.store.log.page(id, -1, 10_000);
const recording = async (id: string) => (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id })).session.recording as string;
const workspace = async (id: string) => (await app.ok(WORKSPACE, { id })).session.workspace as Array<{ key: string; value: string; seq: number }>;
const fork = async (sessionId: string, atSeq: number) => (await app.ok(FORK, { i: { sessionId, atSeq } })).forkSession;
/** Runs `!call note_read {"key": key}` as a turn of `id` and returns that call's result. */
async function noteRead(id: string, key: string) {
  await send(id, `!call note_read ${JSON.stringify({ key })}`);
  await idle();
  const result = (await log(id)).findLast((e) => e.type === 'tool/result')!;
  expect(anyData(result).name).toBe('note_read');
  return [anyData(result).status, anyData(result).content];
}
const toolRunning = (id: string) => new Promise<void>((resolve) => app.turnUpdates.on(id, (u: TurnUpdate) => u.kind === 'TOOL_RUNNING' && resolve()));

describe('the workspace rewinds with the log', () => {
  it('a fork between two writes of a key reads the first; the parent keeps the second; Session.workspace lists entries with seqs', async () => {
    const p = await create();
    await send(p, 'turn 1\n!call note_write {"key":"a","value":"1"}\n!call note_write {"key":"b","value":"x"}');
    await idle();
    await send(p, 'turn 2\n!call note_write {"key":"a","value":"2"}');
    await idle();
    const parentLog = await log(p);
    const writes = parentLog.filter((e) => e.type === 'plugin/workspace/write');
    expect(writes.map((e) => e.data)).toEqual([
      { callId: 'call_1_1_1', key: 'a', value: '1' },
      { callId: 'call_1_1_2', key: 'b', value: 'x' },
      { callId: 'call_2_1_1', key: 'a', value: '2' },
    ]);
    // Each write is stored right before its ok result (one append).
    for (const w of writes) expect(parentLog[w.seq + 1]).toMatchObject({ type: 'tool/result', data: { callId: anyData(w).callId, status: 'ok' } });
    expect(await workspace(p)).toEqual([
      { key: 'a', value: '2', seq: writes[2].seq },
      { key: 'b', value: 'x', seq: writes[1].seq },
    ]);
    const before = await recording(p);

    const turn1End = parentLog.find((e) => e.type === 'turn/end')!;
    const { session: child } = await fork(p, turn1End.seq);
    expect(await workspace(child.id)).toEqual([
      { key: 'a', value: '1', seq: writes[0].seq },
      { key: 'b', value: 'x', seq: writes[1].seq },
    ]);
    expect(await noteRead(child.id, 'a')).toEqual(['ok', '1']);
    // The child writes its own value; the parent does not see it, the child's workspace does.
    await send(child.id, '!call note_write {"key":"a","value":"child"}\n!then\n!call note_read {"key":"a"}');
    await idle();
    expect((await log(child.id)).findLast((e) => e.type === 'tool/result')!.data).toMatchObject({ name: 'note_read', status: 'ok', content: 'child' });
    expect((await workspace(child.id)).find((e) => e.key === 'a')!.value).toBe('child');
    // A grandchild cut inside the child's inherited range (before turn 1's second write) sees only a=1.
    const { session: grandchild } = await fork(child.id, writes[1].seq - 1);
    expect(await workspace(grandchild.id)).toEqual([{ key: 'a', value: '1', seq: writes[0].seq }]);
    expect(await noteRead(grandchild.id, 'b')).toEqual(['error', 'no note named "b"']);

    // The parent is unchanged, byte for byte, and still reads a=2.
    expect(await recording(p)).toBe(before);
    expect((await workspace(p)).find((e) => e.key === 'a')!.value).toBe('2');
  });

  it('Session.workspace(atSeq) is the workspace as of any event: a write counts from its ok result on; a seq outside the log is refused', async () => {
    const p = await create();
    await send(p, 'turn 1\n!call note_write {"key":"a","value":"1"}');
    await idle();
    await send(p, 'turn 2\n!call note_write {"key":"a","value":"2"}\n!call note_write {"key":"b","value":"x"}');
    await idle();
    const events = await log(p);
    const writes = events.filter((e) => e.type === 'plugin/workspace/write');
    const at = async (atSeq: number) =>
      (await app.ok(`query($id: ID!, $at: Int) { session(id: $id) { workspace(atSeq: $at) { key value seq } } }`, { id: p, at: atSeq })).session.workspace;
    expect(await at(0)).toEqual([]);
    expect(await at(writes[0].seq)).toEqual([]); // the write without its result yet
    expect(await at(writes[0].seq + 1)).toEqual([{ key: 'a', value: '1', seq: writes[0].seq }]);
    expect(await at(writes[2].seq)).toEqual([{ key: 'a', value: '2', seq: writes[1].seq }]);
    expect(await at(events.length - 1)).toEqual(await workspace(p));
    const outside = await app.gql(`query($id: ID!) { session(id: $id) { workspace(atSeq: 10000) { key } } }`, { id: p });
    expect(outside.errors?.[0].extensions?.code).toBe('SEQ_OUT_OF_RANGE');
  });

  it('a fork mid-note_write (before its result): the write is absent in the child and the synthetic result says so', async () => {
    const p = await create();
    const running = toolRunning(p);
    await send(p, '!call note_write {"key":"late","value":"v","delayMs":800}');
    await running;
    const inFlight = await log(p);
    expect(inFlight.at(-1)!.type).toBe('model/message');
    const { session: child, syntheticEvents } = await fork(p, inFlight.at(-1)!.seq);
    expect(syntheticEvents.map((e: any) => [e.type, e.data.status ?? e.data.reason])).toEqual([
      ['tool/result', 'not-started'],
      ['step/end', 'forked'],
      ['turn/end', 'forked'],
    ]);
    expect(syntheticEvents[0].data.content).toContain(`forked at event ${inFlight.at(-1)!.seq} of session ${p}`);
    expect(syntheticEvents[0].data.content).toContain('may already have changed the world');
    await idle();
    // The parent completed its write after the cut; the child never had it.
    expect(await workspace(p)).toEqual([{ key: 'late', value: 'v', seq: inFlight.length }]);
    expect(await workspace(child.id)).toEqual([]);
    expect((await log(child.id)).some((e) => e.type === 'plugin/workspace/write')).toBe(false);
    expect(await noteRead(child.id, 'late')).toEqual(['error', 'no note named "late"']);
  });

  it('a fork between a write and its result (at the write seq) leaves the write out, like the result; at the result it is in', async () => {
    const p = await create();
    await send(p, '!call note_write {"key":"k","value":"v"}');
    await idle();
    const w = (await log(p)).find((e) => e.type === 'plugin/workspace/write')!;
    const atWrite = await fork(p, w.seq);
    expect(atWrite.syntheticEvents[0]).toMatchObject({ type: 'tool/result', data: { status: 'not-started' } });
    expect(await workspace(atWrite.session.id)).toEqual([]);
    expect(await noteRead(atWrite.session.id, 'k')).toEqual(['error', 'no note named "k"']);
    const atResult = await fork(p, w.seq + 1);
    expect(await workspace(atResult.session.id)).toEqual([{ key: 'k', value: 'v', seq: w.seq }]);
  });

  it('a note_write that fails (timed out after its write was asked) records nothing', async () => {
    const p = await create();
    await send(p, '!call note_write {"key":"slow","value":"v","delayMs":60000}\n!then\n!call note_read {"key":"slow"}');
    await idle();
    const results = (await log(p)).filter((e) => e.type === 'tool/result').map((e) => [anyData(e).name, anyData(e).status, anyData(e).content]);
    expect(results).toEqual([
      ['note_write', 'error', 'timed out after 5000 ms'],
      ['note_read', 'error', 'no note named "slow"'],
    ]);
    expect(await workspace(p)).toEqual([]);
  });

  it('a workspace holds at most 1,000 keys: a new key beyond them is an error result, an existing one can be overwritten', async () => {
    const id = (await app.services.store.createSession({ tenant: 'local' }, { title: 'full' })).id;
    const calls = Array.from({ length: 1000 }, (_, i) => ({ id: `c${i}`, name: 'note_write', arguments: '{}' }));
    await app.services.store.append(id, [
      { type: 'inbox/add', data: { inputId: 'in_full', text: 'fill it' } },
      { type: 'inbox/remove', data: { inputId: 'in_full', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 1, inputId: 'in_full' } },
      { type: 'step/start', data: { turn: 1, step: 1 } },
      { type: 'model/message', data: { turn: 1, step: 1, text: '', toolCalls: calls } },
      ...calls.flatMap((c, i) => [
        { type: 'plugin/workspace/write', data: { callId: c.id, key: `key${String(i).padStart(4, '0')}`, value: String(i) } },
        { type: 'tool/result', data: { turn: 1, step: 1, callId: c.id, resultId: `res_${c.id}`, status: 'ok', content: 'wrote', name: 'note_write' } },
      ]),
      { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
      { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
    ]);
    const listed = await workspace(id);
    expect(listed.length).toBe(1000);
    expect(listed[999]).toMatchObject({ key: 'key0999', value: '999' });
    await send(id, '!call note_write {"key":"one-too-many","value":"v"}\n!call note_write {"key":"key0005","value":"again"}');
    await idle();
    const results = (await log(id))
      .filter((e) => e.type === 'tool/result')
      .slice(-2)
      .map((e) => [anyData(e).status, anyData(e).content]);
    expect(results).toEqual([
      ['error', 'the note store is full (1000 notes): overwrite an existing note instead'],
      ['ok', 'wrote note "key0005"'],
    ]);
    expect((await workspace(id)).find((e) => e.key === 'key0005')!.value).toBe('again');
  });

  it('deleting a session deletes its workspace with its log', async () => {
    const p = await create();
    await send(p, '!call note_write {"key":"gone","value":"soon"}');
    await idle();
    const { rows: before } = await app.db.pool.query(`SELECT count(*)::int AS n FROM "Event" WHERE "sessionId" = $1 AND type = 'plugin/workspace/write'`, [p]);
    expect(before[0].n).toBe(1);
    await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: p });
    await reclaimed(app);
    const { rows: after } = await app.db.pool.query(`SELECT count(*)::int AS n FROM "Event" WHERE "sessionId" = $1`, [p]);
    expect(after[0].n).toBe(0);
    expect((await app.ok(WORKSPACE, { id: p })).session).toBeNull();
  });
});
