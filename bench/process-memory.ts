// Where a Linux process's resident memory is, from /proc/<pid>/smaps: the
// soak prints it beside process.memoryUsage(), which says nothing of memory
// outside V8's heap but `external` (docs/benchmarks.md "Soak").
import fs from 'node:fs';

/** glibc's thread arenas are heaps of this size, mapped at this alignment (HEAP_MAX_SIZE on 64-bit). */
const ARENA_HEAP_BYTES = 64 * 2 ** 20;

/** Resident MB by kind of mapping. */
export interface ResidentBreakdown {
  /** Anonymous memory in glibc's thread arenas (malloc from threads other than the main one: libuv's pool, V8's workers). */
  arenasMB: number;
  /** How many thread-arena heaps are mapped. */
  arenaHeaps: number;
  /** The main thread's malloc heap (brk). */
  brkHeapMB: number;
  /** Other anonymous memory: V8's heap pages, large mallocs (mmapped on their own), thread stacks. */
  otherAnonMB: number;
  /** Files mapped: the node binary, shared libraries. */
  fileMB: number;
}

interface Mapping {
  start: bigint;
  end: bigint;
  perms: string;
  path: string;
  rssKB: number;
}

function mappings(pid: number): Mapping[] {
  const out: Mapping[] = [];
  for (const line of fs.readFileSync(`/proc/${pid}/smaps`, 'utf8').split('\n')) {
    const head = line.match(/^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$/);
    if (head) out.push({ start: BigInt(`0x${head[1]}`), end: BigInt(`0x${head[2]}`), perms: head[3], path: head[4], rssKB: 0 });
    else if (line.startsWith('Rss:')) out[out.length - 1].rssKB = Number(line.split(/\s+/)[1]);
  }
  return out;
}

/** The process's resident memory by kind; undefined once it has exited. */
export function residentBreakdown(pid: number): ResidentBreakdown | undefined {
  let maps: Mapping[];
  try {
    maps = mappings(pid);
  } catch {
    return undefined;
  }
  const heap = BigInt(ARENA_HEAP_BYTES);
  // A thread arena's heap is a read-write part from a 64 MiB boundary, the rest of the 64 MiB reserved (---p) until it grows.
  const arena = new Set<Mapping>();
  maps.forEach((m, i) => {
    if (m.path !== '' || m.perms !== 'rw-p') return;
    const next = maps[i + 1];
    const heapEnd = next && next.start === m.end && next.perms === '---p' && next.path === '' ? next.end : m.end;
    if (m.start % heap === 0n && heapEnd - m.start === heap) arena.add(m);
  });
  let arenasKB = 0;
  let brkKB = 0;
  let otherAnonKB = 0;
  let fileKB = 0;
  for (const m of maps) {
    if (arena.has(m)) arenasKB += m.rssKB;
    else if (m.path === '[heap]') brkKB += m.rssKB;
    else if (m.path.startsWith('/')) fileKB += m.rssKB;
    else otherAnonKB += m.rssKB;
  }
  const mb = (kb: number) => Math.round((kb / 1024) * 10) / 10;
  return { arenasMB: mb(arenasKB), arenaHeaps: arena.size, brkHeapMB: mb(brkKB), otherAnonMB: mb(otherAnonKB), fileMB: mb(fileKB) };
}
