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
import { appendEvents, claimedRunnerSession, runnerFileBatch, sha256 } from './hostile-doors.ts';

let app: TestApp;
let base: string;
beforeAll(async () => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-paths-'));
  app = await startTestApp({ workspacesDir: path.join(base, 'ws') });
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
    const s = await claimedRunnerSession(app);
    const r = await appendEvents(app, s, runnerFileBatch(s.inputId, [{ path: 'a\ud800.txt', hash: sha256('x'), size: 1 }]));
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
    expect(fs.readdirSync(base)).toEqual(['ws']);
    expect(fs.existsSync('/etc/x')).toBe(false);
  });
});
