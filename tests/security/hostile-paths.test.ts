// Paths a model names to the agent's own file tools (docs/files.md "Paths"),
// with the scripted model calling them through the real service: what a path
// names on disk must be the one name its change set records. An unpaired
// UTF-16 surrogate is written to disk as U+FFFD, so two such names are one
// file, and Postgres stores neither: the call is an error result, never a
// failed turn. Names that are distinct bytes (NFC and NFD twins) stay two
// files, through a fork's restore too; every spelling that leaves the
// workspace is an error result, and nothing is written outside.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { appendEvents, calledRunnerSession, runnerFileBatch, sha256 } from './hostile-doors.ts';

let app: TestApp;
let base: string;
/** Where nothing may be written or deleted: a symlink made in a workspace points here. */
let outside: string;
beforeAll(async () => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-paths-'));
  outside = path.join(base, 'outside');
  fs.mkdirSync(outside);
  fs.writeFileSync(path.join(outside, 'keep.txt'), 'outside');
  app = await startTestApp({ workspacesDir: path.join(base, 'ws'), shell: 'on' });
});
afterAll(async () => {
  await app?.close();
  fs.rmSync(base, { recursive: true, force: true });
});

const call = (name: string, args: unknown) => `!call ${name} ${JSON.stringify(args)}`;
const turns = agentTurns(() => app, 'hostile paths');
const FILES = `query($id: ID!) { session(id: $id) { files { path size } } }`;
const filesOf = async (id: string) => ((await app.ok(FILES, { id })).session.files as Array<{ path: string }>).map((f) => f.path);

describe('a path holding an unpaired surrogate', () => {
  it('is an error result naming the rule; the other calls of the step run and the turn ends normally (before: the turn failed)', async () => {
    const id = await turns.create();
    await turns.turn(
      id,
      [
        call('write_file', { path: 'a\ud800.txt', content: 'one' }),
        call('write_file', { path: 'a\udc01.txt', content: 'two' }),
        call('read_file', { path: 'x/\udbff' }),
        call('write_file', { path: 'b.txt', content: 'kept' }),
      ].join('\n'),
    );
    const results = await turns.results(id);
    expect(results.map(([name, status]) => [name, status])).toEqual([
      ['write_file', 'error'],
      ['write_file', 'error'],
      ['read_file', 'error'],
      ['write_file', 'ok'],
    ]);
    for (const [, , content] of results.slice(0, 3)) expect(content).toContain('unpaired surrogate');
    expect((await turns.tail(id, 1))[0]).toEqual(['turn/end', 'completed']);
    expect(await filesOf(id)).toEqual(['b.txt']);
  });

  it("is refused at a runner's appendEvents as BAD_USER_INPUT; the log is unchanged", async () => {
    const s = await calledRunnerSession(app);
    const r = await appendEvents(app, s, runnerFileBatch([{ path: 'a\ud800.txt', hash: sha256('x'), size: 1 }]));
    expect(r.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect((await app.ok(`query($id: ID!) { session(id: $id) { eventCount } }`, { id: s.id })).session.eventCount).toBe(s.eventCount);
  });
});

describe('names that are distinct bytes', () => {
  it('NFC and NFD twins are two files, recorded and restored at a fork as two', async () => {
    const nfc = 'caf\u00e9.txt';
    const nfd = 'cafe\u0301.txt';
    const id = await turns.create();
    await turns.turn(id, [call('write_file', { path: nfc, content: 'composed' }), call('write_file', { path: nfd, content: 'decomposed' })].join('\n'));
    expect((await turns.results(id)).map(([, status]) => status)).toEqual(['ok', 'ok']);
    expect((await filesOf(id)).sort()).toEqual([nfc, nfd].sort());
    const fork = (await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id })).forkSession.session.id as string;
    await turns.turn(fork, [call('read_file', { path: nfc }), call('read_file', { path: nfd })].join('\n'));
    expect((await turns.results(fork)).slice(-2).map(([, status, content]) => [status, content])).toEqual([
      ['ok', 'composed'],
      ['ok', 'decomposed'],
    ]);
  });
});

describe('spellings that leave the workspace, named to the file tools', () => {
  it.each([
    ['../x', '../x'],
    ['/etc/x', '/etc/x'],
    ['a/../../x', 'a/../../x'],
    ['..\\x', '..\\x'],
    ['a NUL', 'x\u0000y'],
    ['1,025 characters', 'x'.repeat(1025)],
    ['a 256-byte name', 'n'.repeat(256)],
    ['.', '.'],
    ['empty', ''],
  ])('%s: an error result for write_file, read_file and delete_file; nothing written outside', async (_name, p) => {
    const id = await turns.create();
    await turns.turn(id, [call('write_file', { path: p, content: 'pwned' }), call('read_file', { path: p }), call('delete_file', { path: p })].join('\n'));
    expect((await turns.results(id)).map(([, status]) => status)).toEqual(['error', 'error', 'error']);
    expect((await turns.tail(id, 1))[0]).toEqual(['turn/end', 'completed']);
    expect(fs.readdirSync(base).sort()).toEqual(['outside', 'ws']);
    expect(fs.existsSync('/etc/x')).toBe(false);
  });
});

describe("a symlink the agent's shell made in the workspace, pointing outside", () => {
  it('is never written or deleted through, by the file tools or at a fork; the fork is made without it and writes only inside', async () => {
    const id = await turns.create();
    await turns.turn(id, call('shell', { command: `ln -s ${outside} out && ln -s ../../outside up && mkdir d && ln -s ${outside}/keep.txt d/keep.txt` }));
    expect((await turns.results(id))[0][1]).toBe('ok');
    const attempts = [
      call('write_file', { path: 'out/x.txt', content: 'pwned' }),
      call('write_file', { path: 'up/x.txt', content: 'pwned' }),
      call('write_file', { path: 'out/keep.txt', content: 'pwned' }),
      call('edit_file', { path: 'out/keep.txt', oldText: 'outside', newText: 'pwned' }),
      call('delete_file', { path: 'out/keep.txt' }),
      call('delete_file', { path: 'up/keep.txt' }),
    ];
    await turns.turn(id, attempts.join('\n'));
    expect((await turns.results(id)).slice(1).map(([name, status]) => [name, status])).toEqual([
      ['write_file', 'error'],
      ['write_file', 'error'],
      ['write_file', 'error'],
      ['edit_file', 'error'],
      ['delete_file', 'error'],
      ['delete_file', 'error'],
    ]);
    // Nor where a symlink to a file outside stands in the file's place.
    await turns.turn(id, call('write_file', { path: 'd/keep.txt', content: 'inside' }));
    expect((await turns.results(id)).at(-1)).toEqual(['write_file', 'error', '"d/keep.txt" is not a regular file']);
    // A fork is made from the log (symlinks are not recorded): the same names are plain directories there, inside.
    const fork = (await app.ok(`mutation($id: ID!) { forkSession(input: { sessionId: $id }) { session { id } } }`, { id })).forkSession.session.id as string;
    await turns.turn(fork, call('write_file', { path: 'out/x.txt', content: 'in the fork' }));
    expect((await turns.results(fork)).at(-1)![1]).toBe('ok');
    expect(await filesOf(fork)).toEqual(['out/x.txt']);
    expect(fs.readdirSync(outside)).toEqual(['keep.txt']);
    expect(fs.readFileSync(path.join(outside, 'keep.txt'), 'utf8')).toBe('outside');
  });
});
