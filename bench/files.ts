// files: the file workspace (docs/files.md).
// - capture after a call that changed 1 file, in a 100-file and a 10,000-file
//   workspace (goal: ratio ≤ 2: the cost is what changed, not the tree); the
//   walk of the whole tree by size and mtime (what a tool that does not say
//   what it touched would need) beside it, for comparison;
// - restore (materialise) of a 10,000-file tree in a fork's new directory;
// - storage for 100 forks of the 10,000-file tree, each changing one file
//   (goal: ≤ 1.1 × one tree plus what they changed);
// - a tree read (Session.files' store call) at the end of a session with 100
//   and with 2,000 file-changing calls: the first read, which folds the
//   history and writes checkpoints, and the later ones (goal: the later reads
//   do not grow with the history, ratio ≤ 2);
// - a one-byte change to a 5 MiB file: bytes stored (chunks).
// Baseline in the same run: writing the same files with fs alone.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { FileWorkspaces } from '../src/agent/file-workspace.ts';
import { sha256 } from '../src/store/file-blobs.ts';
import { fileCallEvents as callEvents } from '../tests/helpers/file-calls.ts';
import { percentile, QUICK, round, type BenchContext } from './context.ts';

const scope = { tenant: 'local' };
const FILE_BYTES = 1024;

const content = (tag: string, i: number) => Buffer.from(`${tag} ${i} `.padEnd(FILE_BYTES, '.'));
const fileName = (i: number) => `src/d${i % 100}/f${i}.txt`;

/** A session whose log holds a tree of `n` files (one change set), its contents stored. */
async function sessionWithTree(ctx: BenchContext, n: number, tag: string): Promise<string> {
  const { id } = await ctx.store.createSession(scope, { title: `files ${n}` });
  const blobs = Array.from({ length: n }, (_, i) => ({ path: fileName(i), content: content(tag, i) })).map((f) => ({ ...f, hash: sha256(f.content) }));
  for (let i = 0; i < blobs.length; i += 1000) await ctx.store.files.put(id, blobs.slice(i, i + 1000));
  await ctx.store.append(
    id,
    callEvents(
      1,
      blobs.map((b) => ({ path: b.path, hash: b.hash, size: b.content.byteLength })),
    ),
  );
  return id;
}

const time = async (n: number, fn: (i: number) => Promise<unknown>) => {
  const times: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = performance.now();
    await fn(i);
    times.push(performance.now() - t);
  }
  times.sort((a, b) => a - b);
  return { p50: round(percentile(times, 50), 3), p99: round(percentile(times, 99), 3) };
};

export async function benchFiles(ctx: BenchContext) {
  const root = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-bench-files-'));
  const workspaces = new FileWorkspaces(root, ctx.store.files, ctx.store.log);
  const big = QUICK ? 2_000 : 10_000;
  const runs = QUICK ? 20 : 100;
  try {
    // Capture after a call that changed one file.
    const capture: Record<number, { p50: number; p99: number }> = {};
    const walk: Record<number, { p50: number; p99: number }> = {};
    for (const n of [100, big]) {
      const id = await sessionWithTree(ctx, n, `capture${n}`);
      const ws = workspaces.of(id);
      await ws.ready();
      const times: number[] = [];
      for (let i = 0; i < runs; i++) {
        await ws.writeFile(fileName(i % n), content(`edit${n}`, i)); // the call itself (untimed)
        const t = performance.now();
        const c = await ws.capture({ walk: false });
        await ctx.store.files.put(id, c.blobs);
        times.push(performance.now() - t);
        if (c.changes.length !== 1) throw new Error(`expected one change, got ${c.changes.length}`);
      }
      times.sort((a, b) => a - b);
      capture[n] = { p50: round(percentile(times, 50), 3), p99: round(percentile(times, 99), 3) };
      walk[n] = await time(Math.max(3, runs / 10), async (i) => {
        await fs.promises.writeFile(path.join(ws.dir, fileName(i % n)), content(`walk${n}`, i));
        const c = await ws.capture({ walk: true });
        if (c.changes.length !== 1) throw new Error(`expected one change from the walk, got ${c.changes.length}`);
      });
    }

    // Restore a big tree into a fork's new directory (lazily, as its agent's first file tool would).
    const parent = await sessionWithTree(ctx, big, 'restore');
    const restores: number[] = [];
    for (let i = 0; i < 3; i++) {
      const child = await ctx.store.fork(scope, parent, (await ctx.store.getSession(scope, parent))!.eventCount - 1);
      const t = performance.now();
      await workspaces.of(child.session.id).ready();
      restores.push(performance.now() - t);
    }
    restores.sort((a, b) => a - b);
    const rawDir = path.join(root, 'raw');
    const rawStart = performance.now();
    for (let i = 0; i < big; i++) {
      const p = path.join(rawDir, fileName(i));
      await fs.promises.mkdir(path.dirname(p), { recursive: true });
      await fs.promises.writeFile(p, content('raw', i));
    }
    const rawWrite = performance.now() - rawStart;

    // Storage for 100 forks of the big tree, each changing one file.
    // Bytes of contents stored: whole blobs and chunks.
    const blobBytes = async () =>
      Number(
        (
          await ctx.db.pool.query(
            'SELECT (SELECT coalesce(sum(octet_length(content)), 0) FROM "FileBlob") + (SELECT coalesce(sum(size), 0) FROM "FileChunk") AS n',
          )
        ).rows[0].n,
      );
    const before = await blobBytes();
    const tree = await sessionWithTree(ctx, big, 'forks');
    const oneTree = (await blobBytes()) - before;
    const cut = (await ctx.store.getSession(scope, tree))!.eventCount - 1;
    let changed = 0;
    for (let i = 0; i < 100; i++) {
      const child = (await ctx.store.fork(scope, tree, cut)).session;
      const c = content(`fork${i}`, i);
      const hash = sha256(c);
      await ctx.store.files.put(child.id, [{ hash, content: c }]);
      await ctx.store.append(child.id, callEvents(2, [{ path: fileName(i), hash, size: c.byteLength }]));
      changed += c.byteLength;
    }
    const forks = (await blobBytes()) - before;

    // Tree reads on long file histories: 100 and `long` calls of 3 changed paths each over 200 paths.
    const long = QUICK ? 500 : 2_000;
    const reads: Record<number, { first: number; later: { p50: number; p99: number } }> = {};
    for (const calls of [100, long]) {
      const { id } = await ctx.store.createSession(scope, { title: `history ${calls}` });
      for (let i = 0; i < calls; i++) {
        const files = [0, 1, 2]
          .map((k) => ({ path: `h/${(i * 3 + k) % 200}.txt`, content: content(`history${calls}`, i * 3 + k) }))
          .map((f) => ({ ...f, hash: sha256(f.content) }));
        await ctx.store.files.put(id, files);
        await ctx.store.append(
          id,
          callEvents(
            i + 1,
            files.map((f) => ({ path: f.path, hash: f.hash, size: f.content.byteLength })),
          ),
        );
      }
      const t = performance.now();
      await ctx.store.files.tree(id);
      const first = round(performance.now() - t, 3);
      reads[calls] = { first, later: await time(runs, () => ctx.store.files.tree(id)) };
    }

    // A one-byte change to a big file: what the second version adds to storage.
    const bigFile = crypto.randomBytes(5 * 1024 * 1024);
    const edited = Buffer.from(bigFile);
    edited[2_500_000] ^= 1;
    const { id: bigId } = await ctx.store.createSession(scope, { title: 'big file' });
    const s0 = await blobBytes();
    await ctx.store.files.put(bigId, [{ hash: sha256(bigFile), content: bigFile }]);
    const s1 = await blobBytes();
    await ctx.store.files.put(bigId, [{ hash: sha256(edited), content: edited }]);
    const s2 = await blobBytes();

    return {
      [`capture 1 changed file, 100 files (ms)`]: capture[100],
      [`capture 1 changed file, ${big} files (ms)`]: capture[big],
      [`capture ratio ${big}/100 (p50, goal ≤ 2)`]: round(capture[big].p50 / capture[100].p50),
      [`walk capture, 100 files (ms)`]: walk[100],
      [`walk capture, ${big} files (ms)`]: walk[big],
      [`restore ${big} files (ms, p50 of 3)`]: round(percentile(restores, 50)),
      [`baseline: fs writes of ${big} files (ms)`]: round(rawWrite),
      [`blob bytes: one ${big}-file tree`]: oneTree,
      [`blob bytes: it + 100 forks changing 1 file each`]: forks,
      [`storage ratio (goal ≤ 1.1 × (tree + changed))`]: round(forks / (oneTree + changed), 3),
      [`tree read, 100 calls: first (ms)`]: reads[100].first,
      [`tree read, 100 calls: later (ms)`]: reads[100].later,
      [`tree read, ${long} calls: first (ms)`]: reads[long].first,
      [`tree read, ${long} calls: later (ms)`]: reads[long].later,
      [`tree read ratio ${long}/100 calls (later p50, goal ≤ 2)`]: round(reads[long].later.p50 / reads[100].later.p50),
      [`bytes stored: a 5 MiB file`]: s1 - s0,
      [`bytes stored: the same with 1 byte changed`]: s2 - s1,
    };
  } finally {
    fs.rmSync(root, { recursive: true, force: true });
  }
}
