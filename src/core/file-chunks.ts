// Where a big file's content is cut into chunks (big files chunked),
// pure. Each chunk is stored once by sha-256 (store/file-blobs.ts), so a new
// version of a big file stores only the chunks that differ.
//
// Content-defined chunking, not fixed-size blocks: a boundary falls where a
// rolling hash of the last 32 bytes (a gear hash, as in FastCDC) has its top
// 16 bits zero, so it depends on the bytes around it, not on its offset. A
// byte inserted or deleted moves only the boundaries next to it: the chunks
// before and after it keep their hashes. With fixed-size blocks every block
// after an insertion would shift and be stored again.
//
// Sizes: 16 KiB at least, 64 KiB on average past the minimum, 256 KiB at
// most. A one-byte change stores about one chunk (tens of KiB, at most
// 256 KiB) instead of the file; a 10 MiB file (the largest a workspace takes)
// is about 130 chunk rows, few enough to read back in one statement. Files of
// at most CHUNK_MAX bytes are stored whole: they would be one chunk anyway.
// These numbers and the gear table fix every chunk's hash: changing them
// stores new versions differently (still correctly) but dedups less against
// old ones.

export const CHUNK_MIN = 16 * 1024;
export const CHUNK_MAX = 256 * 1024;
/** A boundary where the hash's top 16 bits are zero: one position in 65,536 past the minimum. */
const BOUNDARY_MASK = 0xffff0000;

/** 256 fixed pseudo-random 32-bit values (xorshift32 from a fixed seed). */
const GEAR = (() => {
  const table = new Uint32Array(256);
  let x = 0x2545f491;
  for (let i = 0; i < 256; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    table[i] = x;
  }
  return table;
})();

/** Whether content of this size is stored as chunks rather than whole. */
export const isChunked = (size: number) => size > CHUNK_MAX;

/** The end offsets of the chunks of `bytes`, in order (the last is `bytes.length`). */
export function chunkEnds(bytes: Uint8Array): number[] {
  const ends: number[] = [];
  let start = 0;
  while (start < bytes.length) {
    const limit = Math.min(bytes.length, start + CHUNK_MAX);
    let end = limit;
    let h = 0;
    // The minimum is skipped, not hashed: the hash only sees the last 32 bytes, so starting later changes nothing but speed.
    for (let i = start + CHUNK_MIN - 32; i < limit; i++) {
      h = ((h << 1) + GEAR[bytes[i]]) >>> 0;
      if (i + 1 - start >= CHUNK_MIN && (h & BOUNDARY_MASK) === 0) {
        end = i + 1;
        break;
      }
    }
    ends.push(end);
    start = end;
  }
  return ends;
}

/** The chunks of `bytes` (views into it, no copies). */
export function chunksOf(bytes: Uint8Array): Uint8Array[] {
  let start = 0;
  return chunkEnds(bytes).map((end) => {
    const c = bytes.subarray(start, end);
    start = end;
    return c;
  });
}
