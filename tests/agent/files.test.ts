// The file workspace through GraphQL and the production agent loop
// with the scripted model: what a cut mid-call restores and tells the model,
// forks that change the same file differently, paths kept inside the
// workspace, the quota, what changed between events, and the blobs a deletion
// removes. (A fork at every event: tests/spec/file-spec.ts.)
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { reclaimed } from '../helpers/reclaimed.ts';
import { waitFor } from '../helpers/wait.ts';
import { anyData } from '../helpers/event-data.ts';

let app: TestApp;
let root: string;
beforeAll(async () => {
  root = fs.mkdtempSync(path.join(os.tmpdir(), 'files-test-'));
  app = await startTestApp({ workspacesDir: root, workspaceLimits: { maxBytes: 1000, maxFiles: 5 } });
});
afterAll(async () => {
  await app.close();
  fs.rmSync(root, { recursive: true, force: true });
});

const create = async () => (await app.ok(`mutation { createSession(input: { title: "files" }) { id } }`)).createSession.id as string;
const send = (sessionId: string, text: string) => app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId, text } });
const turn = async (id: string, text: string) => {
  await send(id, text);
  await app.services.host.idle();
};
const log = (id: string) => app.services.store.log.page(id, -1, 10_000);
const results = async (id: string) =>
  (await log(id)).filter((e) => e.type === 'tool/result').map((e) => [anyData(e).name, anyData(e).status, anyData(e).content]);
const fork = async (sessionId: string, atSeq: number) =>
  (await app.ok(`mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } syntheticEvents { type data } } }`, { i: { sessionId, atSeq } }))
    .forkSession;
const file = async (id: string, p: string, atSeq?: number) =>
  (
    await app.ok(`query($id: ID!, $p: String!, $a: Int) { session(id: $id) { file(path: $p, atSeq: $a) { path size hash seq text base64 } } }`, {
      id,
      p,
      a: atSeq,
    })
  ).session.file;
const files = async (id: string, atSeq?: number, dir?: string) =>
  (await app.ok(`query($id: ID!, $a: Int, $d: String) { session(id: $id) { files(atSeq: $a, path: $d) { path size hash seq } } }`, { id, a: atSeq, d: dir }))
    .session.files;
const write = (p: string, content: string) => `!call write_file ${JSON.stringify({ path: p, content })}`;

describe('a cut between a write_file call and its result', () => {
  it('restores the file as before the call, and the next model request says so', async () => {
    const p = await create();
    await turn(p, write('notes.txt', 'first\n'));
    await turn(p, write('notes.txt', 'second\n'));
    const parentLog = await log(p);
    const call = parentLog.findLast((e) => e.type === 'model/message' && anyData(e).toolCalls.length)!;
    expect(anyData(call).toolCalls[0]).toMatchObject({ name: 'write_file', effect: 'idempotent', files: 'only' });
    const change = parentLog.findLast((e) => e.type === 'plugin/files/change')!;
    expect(parentLog[change.seq + 1]).toMatchObject({ type: 'tool/result', data: { callId: anyData(change).callId, status: 'ok' } });

    // Cut at the call, and at its change set (the result not yet in the prefix): the files as before the call.
    for (const cut of [call.seq, change.seq]) {
      const { session, syntheticEvents } = await fork(p, cut);
      expect(syntheticEvents[0]).toMatchObject({ type: 'tool/result', data: { status: 'not-started', name: 'write_file' } });
      expect(syntheticEvents[0].data.content).toContain('The files were restored to before this call; it did not run in this branch');
      expect((await file(session.id, 'notes.txt')).text).toBe('first\n');

      // The child's agent reads the file as before the call, and its model saw the wording.
      const before = app.models.scripted.requestCount;
      await turn(session.id, '!call read_file {"path":"notes.txt"}');
      const first = app.models.scripted.recentRequests.at(before - app.models.scripted.requestCount)!; // the child's first request
      expect(first.messages.at(-1)).toMatchObject({ role: 'user', content: '!call read_file {"path":"notes.txt"}' });
      const cutOff = first.messages.find((m) => m.role === 'tool' && m.tool_call_id === anyData(call).toolCalls[0].id) as { content: string };
      expect(cutOff.content).toContain('The files were restored to before this call; it did not run in this branch');
      expect((await results(session.id)).at(-1)).toEqual(['read_file', 'ok', 'first\n']);
    }
    // The parent keeps its own second write.
    expect((await file(p, 'notes.txt')).text).toBe('second\n');
  });
});

describe('crash recovery', () => {
  it("repairs a file tool cut off mid-call with the restored-files wording, and the next file tool sees the log's files, not what the crash left", async () => {
    const id = await create();
    await turn(id, write('a.txt', 'logged'));
    // The process running it died mid-write_file: the call is in the log, no result; the directory holds half-done work.
    await app.services.store.append(id, [
      { type: 'inbox/add', data: { inputId: 'in_crash', text: write('a.txt', 'lost') } },
      { type: 'inbox/remove', data: { inputId: 'in_crash', reason: 'taken' } },
      { type: 'turn/start', data: { turn: 2, inputId: 'in_crash' } },
      { type: 'step/start', data: { turn: 2, step: 1 } },
      {
        type: 'model/message',
        data: { turn: 2, step: 1, text: '', toolCalls: [{ id: 'call_crash', name: 'write_file', arguments: '{}', effect: 'idempotent', files: 'only' }] },
      },
    ]);
    fs.writeFileSync(path.join(root, id, 'a.txt'), 'half-written by the dead process');
    fs.writeFileSync(path.join(root, id, 'stray.txt'), 'left behind');
    await turn(id, '!call list_files {}\n!call read_file {"path":"a.txt"}');
    const repaired = (await log(id)).find((e) => e.type === 'tool/result' && anyData(e).callId === 'call_crash')!;
    expect(anyData(repaired).status).toBe('interrupted');
    expect(anyData(repaired).content).toContain('The files were restored to before this call; it changed no file in this session');
    expect((await results(id)).slice(-2)).toEqual([
      ['list_files', 'ok', 'a.txt (6 bytes)'],
      ['read_file', 'ok', 'logged'],
    ]);
  });
});

describe('forks of one parent', () => {
  it('change the same file differently without touching each other or the parent', async () => {
    const p = await create();
    await turn(p, write('shared.txt', 'base\n'));
    const cut = (await log(p)).at(-1)!.seq;
    const a = (await fork(p, cut)).session.id;
    const b = (await fork(p, cut)).session.id;
    await turn(a, '!call edit_file {"path":"shared.txt","oldText":"base","newText":"from a"}');
    await turn(b, write('shared.txt', 'from b\n') + '\n' + write('only-b.txt', 'b\n'));
    await turn(p, '!call delete_file {"path":"shared.txt"}');
    expect((await file(a, 'shared.txt')).text).toBe('from a\n');
    expect((await file(b, 'shared.txt')).text).toBe('from b\n');
    expect(await file(p, 'shared.txt')).toBeNull();
    expect((await files(a)).map((f: any) => f.path)).toEqual(['shared.txt']);
    expect((await files(b)).map((f: any) => f.path)).toEqual(['only-b.txt', 'shared.txt']);
    expect(await files(p)).toEqual([]);
    // Each agent's directory holds its own version.
    await turn(a, '!call read_file {"path":"shared.txt"}');
    await turn(b, '!call read_file {"path":"shared.txt"}');
    expect((await results(a)).at(-1)).toEqual(['read_file', 'ok', 'from a\n']);
    expect((await results(b)).at(-1)).toEqual(['read_file', 'ok', 'from b\n']);
    // The parent, read at the cut, still has the base.
    expect((await file(p, 'shared.txt', cut)).text).toBe('base\n');
  });
});

describe('every kind of cut', () => {
  it('branchSession, editMessage and fanOut give each child the files of its cut, and its agent works on them', async () => {
    const p = await create();
    await turn(p, write('story.txt', 'chapter 1\n'));
    const turn2Input = (await send(p, '!call edit_file {"path":"story.txt","oldText":"chapter 1","newText":"chapter 2"}')).sendMessage.inputId as string;
    await app.services.host.idle();
    const turn1End = (await log(p)).find((e) => e.type === 'turn/end')!.seq;

    const branch = (
      await app.ok(`mutation($i: BranchSessionInput!) { branchSession(input: $i) { session { id firstLiveSeq } } }`, { i: { sessionId: p, anchorSeq: 0 } })
    ).branchSession.session;
    expect((await file(branch.id, 'story.txt')).text).toBe('chapter 1\n');

    // Edit turn 2's message: the child is cut right before it and answers the new text on the files of turn 1.
    const edited = (
      await app.ok(`mutation($i: EditMessageInput!) { editMessage(input: $i) { session { id firstLiveSeq } } }`, {
        i: { sessionId: p, inputId: turn2Input, text: '!call edit_file {"path":"story.txt","oldText":"chapter 1","newText":"chapter one, edited"}' },
      })
    ).editMessage.session;
    await app.services.host.idle();
    expect((await file(edited.id, 'story.txt', edited.firstLiveSeq - 1)).text).toBe('chapter 1\n');
    expect((await file(edited.id, 'story.txt')).text).toBe('chapter one, edited\n');

    const fan = (
      await app.ok(`mutation($i: FanOutInput!) { fanOut(input: $i) { children { id } } }`, {
        i: { sessionId: p, atSeq: turn1End, variants: [{ message: write('story.txt', 'variant A\n') }, { message: '!call read_file {"path":"story.txt"}' }] },
      })
    ).fanOut.children;
    await app.services.host.idle();
    expect((await file(fan[0].id, 'story.txt')).text).toBe('variant A\n');
    expect((await results(fan[1].id)).at(-1)).toEqual(['read_file', 'ok', 'chapter 1\n']);
    expect((await file(p, 'story.txt')).text).toBe('chapter 2\n');
  });
});

describe('paths stay inside the workspace', () => {
  it('refuses "..", absolute paths and a symlink that leads out', async () => {
    const id = await create();
    await turn(id, write('ok.txt', 'fine'));
    // A symlink in the directory (something outside the file tools made it) pointing out of it.
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'files-outside-'));
    fs.symlinkSync(outside, path.join(root, id, 'link'));
    await turn(id, [write('../x.txt', 'no'), write('/etc/x.txt', 'no'), write('link/x.txt', 'no'), '!call read_file {"path":"link/../../x"}'].join('\n'));
    expect((await results(id)).slice(-4)).toEqual([
      ['write_file', 'error', '"../x.txt" leaves the workspace ("..")'],
      ['write_file', 'error', '"/etc/x.txt" is absolute: paths are relative to the workspace'],
      ['write_file', 'error', '"link/x.txt" leads outside the workspace'],
      ['read_file', 'error', '"link/../../x" leaves the workspace ("..")'],
    ]);
    expect(fs.readdirSync(outside)).toEqual([]);
    fs.rmSync(outside, { recursive: true });
    expect((await app.gql(`query($id: ID!) { session(id: $id) { files(path: "../x") { path } } }`, { id })).errors![0].extensions!.code).toBe('BAD_USER_INPUT');
  });
});

describe('the quota', () => {
  it('refuses a write past the bytes or files of a session, with a clear error, and records nothing for it', async () => {
    const id = await create();
    await turn(id, [write('big.txt', 'x'.repeat(900)), write('more.txt', 'y'.repeat(200))].join('\n'));
    expect((await results(id)).map((r) => r.slice(0, 2))).toEqual([
      ['write_file', 'ok'],
      ['write_file', 'error'],
    ]);
    expect((await results(id))[1][2]).toBe('the workspace quota is 1000 bytes: writing "more.txt" would make it 1100 bytes; delete or shorten files first');
    await turn(id, ['a', 'b', 'c', 'd', 'e'].map((n) => write(`${n}.txt`, n)).join('\n'));
    expect((await results(id)).at(-1)).toEqual(['write_file', 'error', 'the workspace quota is 5 files and directories: delete a file before adding "e.txt"']);
    expect((await files(id)).map((f: any) => f.path)).toEqual(['a.txt', 'b.txt', 'big.txt', 'c.txt', 'd.txt']);
  });
});

describe('Session.fileChanges and Session.file', () => {
  it('lists what was added, changed and deleted between two events, with unified diffs for text; binary content comes as base64', async () => {
    const id = await create();
    await turn(id, [write('keep.txt', 'one\ntwo\nthree\n'), write('gone.txt', 'bye\n')].join('\n'));
    const mid = (await log(id)).at(-1)!.seq;
    await turn(
      id,
      ['!call edit_file {"path":"keep.txt","oldText":"two","newText":"2"}', '!call delete_file {"path":"gone.txt"}', write('new.txt', 'hi\n')].join('\n'),
    );
    const CHANGES = `query($id: ID!, $f: Int!, $t: Int) { session(id: $id) { fileChanges(fromSeq: $f, toSeq: $t) { path kind diff before { size } after { size } } } }`;
    const changes = (await app.ok(CHANGES, { id, f: mid })).session.fileChanges;
    expect(changes.map((c: any) => [c.path, c.kind])).toEqual([
      ['gone.txt', 'DELETED'],
      ['keep.txt', 'CHANGED'],
      ['new.txt', 'ADDED'],
    ]);
    expect(changes[1].diff).toBe('--- a/keep.txt\n+++ b/keep.txt\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n');
    expect(changes[2].diff).toBe('--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1,1 @@\n+hi\n');
    // From nothing: everything of the tree at `mid` is ADDED.
    expect((await app.ok(CHANGES, { id, f: -1, t: mid })).session.fileChanges.map((c: any) => [c.path, c.kind])).toEqual([
      ['gone.txt', 'ADDED'],
      ['keep.txt', 'ADDED'],
    ]);
    const out = await app.gql(CHANGES, { id, f: 10_000 });
    expect(out.errors![0].extensions!.code).toBe('SEQ_OUT_OF_RANGE');

    // A file that is not text (a NUL byte) reads as base64.
    await turn(id, write('bin.dat', 'a\u0000b'));
    expect(await file(id, 'bin.dat')).toMatchObject({ size: 3, text: null, base64: Buffer.from('a\0b').toString('base64') });
  });
});

describe('deleting sessions', () => {
  it('removes the blobs no remaining session stored, and keeps those another session stores', async () => {
    const a = await create();
    const b = await create();
    await turn(a, [write('same.txt', 'shared content'), write('a-only.txt', 'only in a')].join('\n'));
    await turn(b, write('same.txt', 'shared content'));
    const hash = async (id: string, p: string) => (await file(id, p)).hash as string;
    const [shared, aOnly] = [await hash(a, 'same.txt'), await hash(a, 'a-only.txt')];
    expect(await hash(b, 'same.txt')).toBe(shared);
    const blobCount = async (h: string) => (await app.db.pool.query('SELECT count(*)::int AS n FROM "FileBlob" WHERE hash = $1', [h])).rows[0].n;
    expect([await blobCount(shared), await blobCount(aOnly)]).toEqual([1, 1]);
    await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: a });
    await reclaimed(app);
    expect([await blobCount(shared), await blobCount(aOnly)]).toEqual([1, 0]);
    await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: b });
    await reclaimed(app);
    expect(await blobCount(shared)).toBe(0);
    // Every process removes a deleted session's directory when it hears of the deletion.
    await waitFor(() => !fs.existsSync(path.join(root, a)) && !fs.existsSync(path.join(root, b)), { what: 'the directories removed' });
  });

  it('a recording carries the file contents its change sets name: imported after the original is gone, its files read the same', async () => {
    const a = await create();
    await turn(a, [write('r.txt', 'recorded\n'), write('gone.txt', 'x')].join('\n'));
    await turn(a, '!call delete_file {"path":"gone.txt"}');
    const recording: string = (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id: a })).session.recording;
    const lines = recording
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    const blobs = lines.filter((l) => 'blob' in l);
    expect(blobs.map((b) => Buffer.from(b.base64, 'base64').toString()).sort()).toEqual(['recorded\n', 'x']);
    expect(lines.slice(-blobs.length)).toEqual(blobs); // after every event
    const mid = (await log(a)).findLast((e) => e.type === 'turn/end' && anyData(e).turn === 1)!.seq;
    await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: a });

    const copy = (await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: recording })).importRecording.id;
    expect((await files(copy)).map((f: any) => f.path)).toEqual(['r.txt']);
    expect((await file(copy, 'gone.txt', mid)).text).toBe('x');
    // Exported again, the copy's recording is the same stream.
    expect(
      (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id: copy })).session.recording
        .split('\n')
        .filter((l: string) => l.startsWith('{"blob"'))
        .sort(),
    ).toEqual(
      recording
        .split('\n')
        .filter((l) => l.startsWith('{"blob"'))
        .sort(),
    );

    // A content that does not match its hash, or one named but not carried (nor held): refused, nothing written.
    const tampered = recording.replace(blobs[0].base64, Buffer.from('forged').toString('base64'));
    expect((await app.gql(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: tampered })).errors![0].message).toContain(
      'does not match its hash',
    );
    await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: copy });
    await reclaimed(app);
    const withoutBlobs = recording
      .split('\n')
      .filter((l) => !l.startsWith('{"blob"'))
      .join('\n');
    expect((await app.gql(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: withoutBlobs })).errors![0].message).toMatch(
      /names file content [0-9a-f]{64} for "r.txt", which it does not carry and this tenant does not hold/,
    );
  });

  it('an imported copy keeps the contents its log names that the database holds, when the original is deleted', async () => {
    const a = await create();
    await turn(a, write('kept.txt', 'kept by the copy'));
    const recording = (await app.ok(`query($id: ID!) { session(id: $id) { recording } }`, { id: a })).session.recording;
    const copy = (await app.ok(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: recording })).importRecording.id;
    await app.ok(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: a });
    expect((await file(copy, 'kept.txt')).text).toBe('kept by the copy');
    await turn(copy, '!call read_file {"path":"kept.txt"}');
    expect((await results(copy)).at(-1)).toEqual(['read_file', 'ok', 'kept by the copy']);
  });
});
