// What a recording carries besides its events (docs/files.md "Limits"): file
// contents count toward a session's quota through the change sets that name
// them, so a recording may carry only contents its change sets name, each
// once. Before, contents nobody named were stored for the session whatever
// their number or size (three of 400 KB under a 512 KiB quota imported),
// held by no tree and counted by no quota.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { importRecording, postRecording, recordingOf, sessionCount, sha256 } from './hostile-doors.ts';

const MAX_BYTES = 512 * 1024;

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp({ workspaceLimits: { maxBytes: MAX_BYTES, maxFiles: 50 } });
});
afterAll(() => app?.close());

const storedContents = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "FileBlob"')).rows[0].n;

describe('file contents a recording carries', () => {
  it('past the quota, named by no change set: refused at both doors, nothing stored', async () => {
    const named = Buffer.from('the one file its change set names');
    const unnamed = [1, 2, 3].map((n) => Buffer.alloc(400_000, n));
    const recording = recordingOf([{ path: 'a.txt', hash: sha256(named), size: named.byteLength }], [named, ...unnamed]);
    const [sessions, contents] = [await sessionCount(app), await storedContents()];
    const r = await postRecording(app, recording);
    expect(r.status).toBe(400);
    expect(r.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
    expect(r.body.errors[0].message).toBe(`line 12: file content: ${sha256(unnamed[0])} is named by no change set of the recording`);
    const g = await importRecording(app, recording);
    expect(g.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(g.errors?.[0].message).toMatch(/named by no change set/);
    expect([await sessionCount(app), await storedContents()]).toEqual([sessions, contents]);
  });

  it('the same content carried twice is refused; carried once, it imports', async () => {
    const c = Buffer.from('twice');
    const once = recordingOf([{ path: 'a.txt', hash: sha256(c), size: c.byteLength }], [c]);
    const twice = recordingOf([{ path: 'a.txt', hash: sha256(c), size: c.byteLength }], [c, c]);
    const r = await postRecording(app, twice);
    expect(r.status).toBe(400);
    expect(r.body.errors[0].message).toBe(`line 12: file content: ${sha256(c)} is carried twice`);
    expect((await postRecording(app, once)).status).toBe(201);
  });
});
