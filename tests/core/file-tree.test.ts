// The pure parts of the file workspace (core/file-tree.ts, core/unified-diff.ts)
// and the repair wording for file tools (core/repair.ts).
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_WORKSPACE_LIMITS,
  changeSetPathProblem,
  filesChangeDataSchema,
  firstOverQuota,
  foldFileTree,
  listTree,
  TreeUsage,
  treeChanges,
  workspacePath,
} from '../../src/core/file-tree.ts';
import { unifiedDiff } from '../../src/core/unified-diff.ts';
import { syntheticResultContent } from '../../src/core/repair.ts';
import { RecordingValidator, recordingHeader } from '../../src/core/recording.ts';
import { fileCallEvents } from '../helpers/file-calls.ts';

describe('workspace paths', () => {
  it('are canonical, relative and never leave the workspace by their spelling', () => {
    expect(workspacePath('./a//b/./c.txt')).toEqual({ path: 'a/b/c.txt' });
    expect(workspacePath('.')).toEqual({ path: '' });
    expect(workspacePath('a/../b')).toEqual({ problem: '"a/../b" leaves the workspace ("..")' });
    expect(workspacePath('/etc/passwd')).toMatchObject({ problem: expect.stringContaining('absolute') });
    expect(workspacePath('a\\b')).toMatchObject({ problem: expect.stringContaining('"/"') });
    expect(workspacePath('a\0b')).toMatchObject({ problem: expect.stringContaining('NUL') });
  });
});

describe('trees', () => {
  const sets = [
    {
      seq: 5,
      data: {
        callId: 'c1',
        changes: [
          { path: 'a', hash: 'h1', size: 1 },
          { path: 'd/b', hash: 'h2', size: 2 },
        ],
      },
    },
    {
      seq: 9,
      data: {
        callId: 'c2',
        changes: [
          { path: 'a', hash: 'h3', size: 3 },
          { path: 'd/b', hash: null, size: 0 },
        ],
      },
    },
  ];
  it('fold change sets, later ones winning, deletions removing', () => {
    expect(listTree(foldFileTree(sets.slice(0, 1)))).toEqual([
      { path: 'a', hash: 'h1', size: 1, seq: 5 },
      { path: 'd/b', hash: 'h2', size: 2, seq: 5 },
    ]);
    expect(listTree(foldFileTree(sets))).toEqual([{ path: 'a', hash: 'h3', size: 3, seq: 9 }]);
    expect(listTree(foldFileTree(sets.slice(0, 1)), 'd').map((e) => e.path)).toEqual(['d/b']);
  });
  it('differ per path', () => {
    expect(treeChanges(foldFileTree(sets.slice(0, 1)), foldFileTree(sets)).map((c) => [c.path, c.kind])).toEqual([
      ['a', 'CHANGED'],
      ['d/b', 'DELETED'],
    ]);
    expect(treeChanges(new Map(), foldFileTree(sets)).map((c) => c.kind)).toEqual(['ADDED']);
  });
});

describe('unified diffs', () => {
  it('show hunks with three lines of context, as diff -u does', async () => {
    const before = Array.from({ length: 20 }, (_, i) => `l${i}`).join('\n') + '\n';
    const after = before.replace('l1\n', 'L1\n').replace('l18\n', '');
    expect(await unifiedDiff('f', before, after)).toBe(
      '--- a/f\n+++ b/f\n@@ -1,5 +1,5 @@\n l0\n-l1\n+L1\n l2\n l3\n l4\n@@ -16,5 +16,4 @@\n l15\n l16\n l17\n-l18\n l19\n',
    );
    expect(await unifiedDiff('f', 'same\n', 'same\n')).toBe('');
    expect(await unifiedDiff('f', undefined, 'x\n')).toBe('--- /dev/null\n+++ b/f\n@@ -0,0 +1,1 @@\n+x\n');
  });

  it('show a change of the final newline alone', async () => {
    expect(await unifiedDiff('f', 'a\nb', 'a\nb\n')).toBe('--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+b\n');
  });

  it('give up past the edit bound, and past the time bound, without holding the event loop', async () => {
    const lines = (k: string, n: number) => Array.from({ length: n }, (_, i) => `${k}${i}`).join('\n') + '\n';
    expect(await unifiedDiff('f', lines('a', 100), lines('b', 100), { maxEditLines: 150 })).toBeUndefined();
    expect(await unifiedDiff('f', lines('a', 100), lines('b', 100), { maxEditLines: 200 })).toMatch(/^--- a\/f\n\+\+\+ b\/f\n@@ -1,100 \+1,100 @@\n-a0\n/);
    // A costly diff runs a step at a time: timers keep firing while it works, and its time bound ends it.
    let ticks = 0;
    const ticker = setInterval(() => ticks++, 1);
    const costly = await unifiedDiff('f', lines('a', 3000), lines('b', 3000), { maxEditLines: 6000, timeoutMs: 300 });
    clearInterval(ticker);
    expect(costly).toBeUndefined();
    expect(ticks).toBeGreaterThan(10);
  });
});

describe('the repair wording of a file tool', () => {
  const call = { id: 'c1', name: 'edit_file', arguments: '{}', effect: 'side-effects' as const, files: 'only' as const };
  it('says the files were restored, whatever the effect; other tools keep the effect advice', () => {
    const forked = syntheticResultContent({ kind: 'forked', parentSessionId: 'ses_p', cutSeq: 7 }, call, 'side-effects');
    expect(forked).toContain('forked at event 7 of session ses_p');
    expect(forked).toContain('The files were restored to before this call; it did not run in this branch, so it is safe to call "edit_file" again');
    expect(forked).not.toContain('may already have changed the world');
    expect(syntheticResultContent({ kind: 'interrupted', sessionId: 's' }, call, 'side-effects')).toContain(
      'The files were restored to before this call; it changed no file in this session',
    );
    const { files: _, ...elsewhere } = call;
    expect(syntheticResultContent({ kind: 'forked', parentSessionId: 'p', cutSeq: 7 }, elsewhere, 'side-effects')).toContain(
      'may already have changed the world',
    );
  });
});

describe('file contents in a recording', () => {
  const header = JSON.stringify(recordingHeader({ id: 'ses_x' }));
  // A call that wrote one file: its change set names the content the recording carries.
  const events = fileCallEvents(1, [{ path: 'a.txt', hash: 'a'.repeat(64), size: 1 }]).map((e, seq) => JSON.stringify({ seq, ...e }));
  const blob = JSON.stringify({ blob: 'a'.repeat(64), base64: 'eA==' });
  it('come after every event, one line each', () => {
    const v = new RecordingValidator();
    for (const line of [header, ...events, blob]) v.push(line);
    expect(v.blob).toEqual({ blob: 'a'.repeat(64), base64: 'eA==' });
    expect(v.finish()).toMatchObject({ eventCount: events.length, fileBlobs: 1 });
  });
  it('are refused before an event, or with a hash that is not a sha-256', () => {
    const before = new RecordingValidator();
    for (const line of [header, ...events.slice(0, -1)]) before.push(line);
    before.push(JSON.stringify({ blob: 'a'.repeat(64), base64: 'eA==' }));
    expect(() => before.push(events.at(-1)!)).toThrow('file contents come after every event');
    const bad = new RecordingValidator();
    bad.push(header);
    expect(() => bad.push(JSON.stringify({ blob: 'xyz', base64: '' }))).toThrow('sha-256');
  });
});

describe('change sets from outside (every door holds them to one rule)', () => {
  const hash = 'a'.repeat(64);
  it('a recorded path is a workspace path in its canonical form, naming a file', () => {
    for (const ok of ['a.txt', 'src/main.py', 'ü/ß', '.git/config', '...']) expect(changeSetPathProblem(ok), ok).toBeUndefined();
    // A name is at most 255 bytes of UTF-8 (NAME_MAX): 85 three-byte characters are, 86 are not.
    for (const ok of ['n'.repeat(255), `d/${'€'.repeat(85)}`]) expect(changeSetPathProblem(ok), ok).toBeUndefined();
    for (const bad of [
      '../x',
      'a/../../x',
      '/etc/passwd',
      'a\\b',
      'a\0b',
      './a',
      'a//b',
      'a/',
      '',
      '.',
      'x'.repeat(1025),
      'n'.repeat(256),
      `d/${'€'.repeat(86)}`,
    ]) {
      expect(changeSetPathProblem(bad), JSON.stringify(bad)).toBeDefined();
    }
  });

  it('the codec refuses what breaks the rule, naming the path', () => {
    expect(
      filesChangeDataSchema.safeParse({
        callId: 'c',
        changes: [
          { path: 'a', hash, size: 1 },
          { path: 'b', hash: null, size: 0 },
        ],
      }).success,
    ).toBe(true);
    const bad = filesChangeDataSchema.safeParse({ callId: 'c', changes: [{ path: '../x', hash, size: 1 }] });
    expect(bad.error?.issues[0].message).toContain('path "../x" is refused');
    for (const change of [
      { path: 'a', hash: 'H', size: 1 },
      { path: 'a', hash, size: -1 },
      { path: 'a', hash, size: 1.5 },
      { path: 'a', hash, size: 1, extra: 1 },
    ]) {
      expect(filesChangeDataSchema.safeParse({ callId: 'c', changes: [change] }).success, JSON.stringify(change)).toBe(false);
    }
  });

  it('usage counts bytes, files and the directories paths make, as change sets fold', () => {
    const u = new TreeUsage([
      { path: 'a/b/c.txt', size: 3 },
      { path: 'a/d.txt', size: 4 },
    ]);
    expect([u.bytes, u.files, u.entries]).toEqual([7, 2, 4]);
    u.set('a/b/c.txt', null);
    expect([u.bytes, u.files, u.entries]).toEqual([4, 1, 2]);
    u.set('a/d.txt', 10);
    expect([u.bytes, u.files, u.entries]).toEqual([10, 1, 2]);
  });

  it('a path that is a file and a directory at once (no disk holds it) is a problem until one of them goes', () => {
    const limits = { maxBytes: 100, maxFiles: 100, maxFileBytes: 100 };
    const u = new TreeUsage([{ path: 'a/b', size: 1 }]);
    u.set('a', 1);
    expect(u.problem(limits)).toBe('"a" would be both a file and a directory');
    u.set('a/b', null);
    expect(u.problem(limits)).toBeUndefined();
    u.set('a/b/c', 1);
    expect(u.problem(limits)).toBe('"a" would be both a file and a directory');
    u.set('a', null);
    expect(u.problem(limits)).toBeUndefined();
    expect(
      firstOverQuota(
        new Map(),
        [
          { seq: 4, data: { callId: 'c', changes: [{ path: 'x/y', hash, size: 1 }] } },
          { seq: 6, data: { callId: 'd', changes: [{ path: 'x', hash, size: 1 }] } },
        ],
        limits,
      ),
    ).toEqual({
      seq: 6,
      problem: '"x" would be both a file and a directory',
    });
  });

  it('the first change set past the quota is named (a fork there would make that tree)', () => {
    const limits = { maxBytes: 10, maxFiles: 3, maxFileBytes: 8 };
    const sets = [
      { seq: 1, data: { callId: 'c1', changes: [{ path: 'a', hash, size: 5 }] } },
      {
        seq: 3,
        data: {
          callId: 'c2',
          changes: [
            { path: 'a', hash: null, size: 0 },
            { path: 'b', hash, size: 5 },
          ],
        },
      },
      { seq: 5, data: { callId: 'c3', changes: [{ path: 'c', hash, size: 6 }] } },
    ];
    expect(firstOverQuota(new Map(), sets.slice(0, 2), limits)).toBeUndefined();
    expect(firstOverQuota(new Map(), sets, limits)).toEqual({ seq: 5, problem: 'the workspace quota is 10 bytes, and the files come to 11' });
    expect(firstOverQuota(new Map(), [{ seq: 0, data: { callId: 'c', changes: [{ path: 'd/e/f', hash, size: 1 }] } }], limits)).toBeUndefined();
    expect(firstOverQuota(new Map(), [{ seq: 0, data: { callId: 'c', changes: [{ path: 'd/e/f/g', hash, size: 1 }] } }], limits)?.problem).toContain(
      '3 files and directories, and there are 4',
    );
    expect(firstOverQuota(new Map(), [{ seq: 7, data: { callId: 'c', changes: [{ path: 'big', hash, size: 9 }] } }], limits)).toEqual({
      seq: 7,
      problem: 'a file holds at most 8 bytes, and "big" has 9',
    });
  });
});

describe('usage of a tree as deep and wide as the quota lets it be', () => {
  /** Every read and write of the usage's per-directory counts, counted (the work a change costs, whatever the clock says). */
  class CountedMap<K, V> extends Map<K, V> {
    touched = 0;
    override get(k: K) {
      this.touched++;
      return super.get(k);
    }
    override set(k: K, v: V) {
      this.touched++;
      return super.set(k, v);
    }
    override delete(k: K) {
      this.touched++;
      return super.delete(k);
    }
  }

  it('costs the directories a change makes or empties, not its depth: 9,750 files in their own directories 500 deep', () => {
    const chain = 'd/'.repeat(500);
    const files = Array.from({ length: 9750 }, (_, i) => ({ path: `${chain}${i}/f`, size: 1 }));
    const usage = new TreeUsage();
    const dirs = new CountedMap<string, number>();
    (usage as unknown as { dirs: Map<string, number> }).dirs = dirs;
    for (const f of files) usage.set(f.path, f.size);
    expect(usage.entries).toBe(500 + 9750 + 9750);
    // A file where the chain's last directory is: a clash until the directories below it go, one by one.
    usage.set(chain.slice(0, -1), 1);
    expect(usage.problem(DEFAULT_WORKSPACE_LIMITS)).toBe(`"${chain.slice(0, -1)}" would be both a file and a directory`);
    for (const f of files) usage.set(f.path, null);
    expect(usage.problem(DEFAULT_WORKSPACE_LIMITS)).toBeUndefined();
    expect([usage.entries, usage.files, usage.bytes]).toEqual([500, 1, 1]);
    // Each file counted in every directory above it: 500 updates a file, 10 million for these changes (8 to 17 s here).
    // A change costs the directories it makes or empties: a few for each file, and the chain's 500 once each way.
    expect(dirs.touched).toBeLessThan(10 * (2 * files.length + 2 * 500));
  });
});
