// Tree reads that do not replay the whole history (store/file-tree-checkpoints.ts):
// on a parent with hundreds of file-changing calls and a fork of it cut
// mid-history (one cut between a change set and its result), the tree read at
// many seqs equals the plain fold of every change set in effect — before any
// checkpoint exists, once the reads wrote them, in the fork through the
// parent's checkpoints, and through GraphQL's Session.files — and a read after
// the first folds fewer than CHECKPOINT_EVERY change sets.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { foldFileTree, listTree } from '../../src/core/file-tree.ts';
import { sha256 } from '../../src/store/file-blobs.ts';
import { CHECKPOINT_EVERY, FileTreeCheckpoints } from '../../src/store/file-tree-checkpoints.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { fileCallEvents } from '../helpers/file-calls.ts';

let app: TestApp;
const scope = { tenant: 'local' };
beforeAll(async () => void (app = await startTestApp()));
afterAll(() => app.close());

/** Call i writes two of 40 paths and deletes a third, so files come, change and go. */
async function appendCalls(id: string, from: number, to: number, tag: string, firstTurn = from + 1) {
  for (let i = from; i < to; i++) {
    const writes = [`d${i % 4}/f${(i * 7) % 40}.txt`, `f${(i * 3) % 40}.txt`].map((path) => {
      const content = Buffer.from(`${tag} ${i} ${path}`);
      return { path, hash: sha256(content), content };
    });
    await app.services.store.files.put(id, writes);
    const deleted = `d${(i + 1) % 4}/f${(i * 11) % 40}.txt`;
    const changes = [
      ...writes.map((w) => ({ path: w.path, hash: w.hash, size: w.content.byteLength })),
      ...(writes.some((w) => w.path === deleted) ? [] : [{ path: deleted, hash: null, size: 0 }]),
    ];
    await app.services.store.append(id, fileCallEvents(firstTurn + i - from, changes));
  }
}

/** The plain fold of every change set in effect as of `seq`: what a read must equal. */
async function plainTree(id: string, seq: number) {
  const tree = new Map();
  for await (const page of app.services.store.log.fileChangeSetPages(id, seq)) foldFileTree(page, tree);
  return listTree(tree);
}
const checkpointRows = async () => (await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "FileTreeCheckpoint"')).rows[0].n;

describe('tree reads through checkpoints', () => {
  const CALLS = 5 * CHECKPOINT_EVERY;
  let parent: string;
  let child: string;
  let parentEnd: number;
  let childEnd: number;
  let cut: number;

  beforeAll(async () => {
    parent = (await app.services.store.createSession(scope, { title: 'history' })).id;
    await appendCalls(parent, 0, CALLS, 'parent');
    parentEnd = (await app.services.store.getSession(scope, parent))!.eventCount - 1;
    // A cut between the change set of call 200 and its result: that call's files are not in the fork.
    const events = await app.services.store.log.page(parent, -1, 100_000);
    cut = events.filter((e) => e.type === 'plugin/files/change')[200].seq;
    child = (await app.services.store.fork(scope, parent, cut)).session.id;
    await appendCalls(child, CALLS, CALLS + 2 * CHECKPOINT_EVERY, 'child', 202); // the cut closed turn 201
    childEnd = (await app.services.store.getSession(scope, child))!.eventCount - 1;
  }, 120_000);

  const seqsOf = (end: number) =>
    [0, 5, 6, 7, 100, 1000, 1001, cut - 1, cut, cut + 1, end - 3, end, ...Array.from({ length: 12 }, (_, k) => Math.floor((end * k) / 12) + k)].filter(
      (s) => s >= 0 && s <= end,
    );

  it('equal the plain fold at many seqs, before and after checkpoints exist', async () => {
    expect(await checkpointRows()).toBe(0);
    for (const pass of ['no checkpoints yet', 'checkpoints written by the first pass']) {
      for (const seq of seqsOf(parentEnd))
        expect(listTree(await app.services.store.files.tree(parent, seq)), `${pass}: parent at ${seq}`).toEqual(await plainTree(parent, seq));
      for (const seq of seqsOf(childEnd))
        expect(listTree(await app.services.store.files.tree(child, seq)), `${pass}: fork at ${seq}`).toEqual(await plainTree(child, seq));
      if (pass === 'no checkpoints yet') expect(await checkpointRows()).toBeGreaterThan(0);
    }
    // The fork's cut left the cut-off call's files out; its own calls are in.
    expect(listTree(await app.services.store.files.tree(child, cut))).toEqual(listTree(await app.services.store.files.tree(parent, cut - 1)));
  });

  it('a read folds fewer than CHECKPOINT_EVERY change sets once checkpoints exist, inherited ones included', async () => {
    const log = app.services.store.log;
    const original = log.fileChangeSetPages.bind(log);
    const folded: number[] = [];
    log.fileChangeSetPages = async function* (...args: Parameters<typeof log.fileChangeSetPages>) {
      let sets = 0;
      for await (const page of original(...args)) {
        sets += page.length;
        yield page;
      }
      folded.push(sets);
    };
    try {
      for (const [id, end] of [
        [parent, parentEnd],
        [child, childEnd],
      ] as const) {
        await app.services.store.files.tree(id, end); // writes what a read at the end needs, if anything
        folded.length = 0;
        const tree = await app.services.store.files.tree(id, end);
        expect(folded).toHaveLength(1);
        expect(folded[0]).toBeLessThan(CHECKPOINT_EVERY);
        expect(listTree(tree)).toEqual(await plainTree(id, end));
      }
    } finally {
      log.fileChangeSetPages = original;
    }
    // The fork wrote none under the parent's seqs it already had, and its own past them.
    const { rows } = await app.db.pool.query<{ sessionId: string; seq: number }>('SELECT "sessionId", seq FROM "FileTreeCheckpoint" WHERE "sessionId" = $1', [
      child,
    ]);
    expect(rows.length).toBeGreaterThan(0);
    expect(rows.every((r) => r.seq > cut)).toBe(true);
  });

  it('Session.files over GraphQL answers the same at several seqs', async () => {
    const FILES = `query($id: ID!, $a: Int) { session(id: $id) { files(atSeq: $a) { path size hash seq } } }`;
    for (const [id, end] of [
      [parent, parentEnd],
      [child, childEnd],
    ] as const) {
      for (const seq of seqsOf(end)) expect((await app.ok(FILES, { id, a: seq })).session.files, `${id} at ${seq}`).toEqual(await plainTree(id, seq));
    }
  });
});

describe('the first read of a long history', () => {
  it('folds it a page of change sets at a time (never the history at once), and equals the plain fold', async () => {
    const id = (await app.services.store.createSession(scope, { title: 'paged' })).id;
    await appendCalls(id, 0, 3 * CHECKPOINT_EVERY + 5, 'paged');
    const end = (await app.services.store.getSession(scope, id))!.eventCount - 1;
    const log = app.services.store.log;
    const reads: number[] = [];
    const { fileChangeSetPages } = log;
    log.fileChangeSetPages = async function* (...args: Parameters<typeof log.fileChangeSetPages>) {
      for await (const page of fileChangeSetPages.apply(log, args)) {
        reads.push(page.length);
        yield page;
      }
    };
    let tree;
    try {
      tree = await new FileTreeCheckpoints(app.db.pool, log, { pageSize: 7, pageBytes: 64 * 1024 * 1024 }).tree(id, end);
    } finally {
      Object.assign(log, { fileChangeSetPages });
    }
    expect(reads.reduce((a, b) => a + b, 0)).toBe(3 * CHECKPOINT_EVERY + 5);
    expect(Math.max(...reads)).toBeLessThanOrEqual(7);
    expect(listTree(tree)).toEqual(await plainTree(id, end));
    // Its checkpoints were stored as the pages went by: the next read folds the last 5 change sets only.
    const { rows } = await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "FileTreeCheckpoint" WHERE "sessionId" = $1', [id]);
    expect(rows[0].n).toBe(3);
  }, 120_000);
});
