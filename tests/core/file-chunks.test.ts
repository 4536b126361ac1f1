// Content-defined chunking (core/file-chunks.ts): the chunks make up the
// content, keep within their bounds, and an edit anywhere — in place, an
// insertion or a deletion — leaves the chunks away from it as they were.
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { CHUNK_MAX, CHUNK_MIN, chunkEnds, chunksOf, isChunked } from '../../src/core/file-chunks.ts';

/** Deterministic pseudo-random bytes (sha-256 in counter mode). */
function noise(n: number, seed = 'seed'): Buffer {
  const parts: Buffer[] = [];
  for (let i = 0; parts.length * 32 < n; i++) parts.push(createHash('sha256').update(`${seed}${i}`).digest());
  return Buffer.concat(parts).subarray(0, n);
}
const hashes = (b: Uint8Array) => chunksOf(b).map((c) => createHash('sha256').update(c).digest('hex'));
const newChunks = (before: Uint8Array, after: Uint8Array) => {
  const old = new Set(hashes(before));
  return hashes(after).filter((h) => !old.has(h)).length;
};

describe('chunking', () => {
  const data = noise(4 * 1024 * 1024);

  it('cuts content into chunks that make it up, each within the bounds', () => {
    const chunks = chunksOf(data);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    expect(chunkEnds(data).at(-1)).toBe(data.length);
    for (const c of chunks.slice(0, -1)) {
      expect(c.length).toBeGreaterThanOrEqual(CHUNK_MIN);
      expect(c.length).toBeLessThanOrEqual(CHUNK_MAX);
    }
    // Boundaries are found by content, not forced by the maximum (random data: many chunks, few of maximum size).
    expect(chunks.length).toBeGreaterThan(8);
    expect(chunks.filter((c) => c.length === CHUNK_MAX).length).toBeLessThan(chunks.length / 2);
    expect(chunkEnds(Buffer.from(data))).toEqual(chunkEnds(data));
  });

  it('an edit in place, an inserted byte and a deleted byte each make at most two new chunks', () => {
    const at = 2_000_003;
    const changed = Buffer.from(data);
    changed[at] ^= 0xff;
    const inserted = Buffer.concat([data.subarray(0, at), Buffer.from([7]), data.subarray(at)]);
    const deleted = Buffer.concat([data.subarray(0, at), data.subarray(at + 1)]);
    for (const version of [changed, inserted, deleted]) {
      expect(Buffer.concat(chunksOf(version)).equals(version)).toBe(true);
      const fresh = newChunks(data, version);
      expect(fresh).toBeGreaterThanOrEqual(1);
      expect(fresh).toBeLessThanOrEqual(2);
    }
  });

  it('stores small contents whole; uniform content is cut at the maximum', () => {
    expect(isChunked(CHUNK_MAX)).toBe(false);
    expect(isChunked(CHUNK_MAX + 1)).toBe(true);
    const zeros = Buffer.alloc(CHUNK_MAX * 3 + 5);
    expect(chunkEnds(zeros)).toEqual([CHUNK_MAX, CHUNK_MAX * 2, CHUNK_MAX * 3, CHUNK_MAX * 3 + 5]);
    expect(chunkEnds(Buffer.alloc(0))).toEqual([]);
  });
});
