// What a recording carries besides its events (docs/files.md "Limits"): file
// contents count toward a session's quota through the change sets that name
// them, so a recording may carry only contents its change sets name, each
// once. Before, contents nobody named were stored for the session whatever
// their number or size (three of 400 KB under a 512 KiB quota imported),
// held by no tree and counted by no quota.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig, securityOptions } from '../../src/config.ts';
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

describe('how many contents a recording may name', () => {
  // The validator keeps each named content until the recording ends (its line may come last): a recording of change
  // sets naming tens of millions would hold gigabytes before anything refused it. Past the cap it is refused at the
  // change set that crosses it, before more is read.
  it('past FORKLINE_MAX_RECORDING_CONTENTS, at the change set that crosses it: refused, nothing stored', async () => {
    const capped = await startTestApp({ security: { maxRecordingContents: 3 } });
    try {
      const files = [1, 2, 3, 4].map((n) => Buffer.from(`file ${n}`));
      const changes = files.map((f, i) => ({ path: `f${i}.txt`, hash: sha256(f), size: f.byteLength }));
      const [sessions, contents] = [await sessionCount(capped), (await capped.db.pool.query('SELECT count(*)::int AS n FROM "FileBlob"')).rows[0].n];
      const r = await postRecording(capped, recordingOf(changes, files));
      expect(r.status).toBe(400);
      expect(r.body.errors[0].extensions).toMatchObject({ code: 'BAD_USER_INPUT' });
      expect(r.body.errors[0].message).toMatch(
        /^line \d+: file content: the recording's change sets name more than 3 distinct file contents \(FORKLINE_MAX_RECORDING_CONTENTS\)$/,
      );
      expect([await sessionCount(capped), (await capped.db.pool.query('SELECT count(*)::int AS n FROM "FileBlob"')).rows[0].n]).toEqual([sessions, contents]);
      // At the cap it imports.
      expect((await postRecording(capped, recordingOf(changes.slice(0, 3), files.slice(0, 3)))).status).toBe(201);
    } finally {
      await capped.close();
    }
  });

  it('reads the cap from the environment, with its default', () => {
    expect(securityOptions(loadConfig({})).maxRecordingContents).toBe(1_000_000);
    expect(securityOptions(loadConfig({ FORKLINE_MAX_RECORDING_CONTENTS: '5000' })).maxRecordingContents).toBe(5000);
    expect(() => loadConfig({ FORKLINE_MAX_RECORDING_CONTENTS: '0' })).toThrow(/FORKLINE_MAX_RECORDING_CONTENTS/);
  });
});
