// `npm run soak`: a long mixed load against a real `src/main.ts` process (its own
// embedded Postgres), sampling the process's RSS and its heap's post-GC floor,
// to tell caches warming from a leak. The load is what the fault-injection runs
// send (turns with tool calls, forks, reads, subscriptions), plus recording
// imports and compactions. Every SOAK_SAMPLE_SECONDS the heap is collected
// through the inspector (HeapProfiler.collectGarbage) and process.memoryUsage()
// read; samples go to <out>/samples.jsonl. At the end it prints whether the
// floor over the last SOAK_WINDOW_MINUTES grew less than 10%.
//
// SOAK_MINUTES (default 60), SOAK_SAMPLE_SECONDS (30), SOAK_WINDOW_MINUTES (40,
// capped to two thirds of the run), SOAK_WORKERS (4), SOAK_OUT (a temp dir),
// SOAK_MAX_SESSIONS (unset: the data grows), SOAK_SNAPSHOTS: minutes at which to write heap snapshots (e.g. "20,30"), to
// compare in Chrome DevTools' Memory tab. Each sample also says where RSS is (bench/process-memory.ts).
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import { residentBreakdown, type ResidentBreakdown } from './process-memory.ts';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const MINUTES = Number(process.env.SOAK_MINUTES ?? 60);
const SAMPLE_MS = Number(process.env.SOAK_SAMPLE_SECONDS ?? 30) * 1000;
const WINDOW_MINUTES = Math.min(Number(process.env.SOAK_WINDOW_MINUTES ?? 40), (MINUTES * 2) / 3);
const WORKERS = Number(process.env.SOAK_WORKERS ?? 4);
/** Unset: the data grows for the whole run. Set: past this many sessions the oldest trees are deleted, so caches keyed by session reach their steady state. */
const MAX_SESSIONS = process.env.SOAK_MAX_SESSIONS ? Number(process.env.SOAK_MAX_SESSIONS) : undefined;
const SNAPSHOT_MINUTES = (process.env.SOAK_SNAPSHOTS ?? '')
  .split(',')
  .filter(Boolean)
  .map(Number)
  .sort((a, b) => a - b);
const OUT = process.env.SOAK_OUT ?? fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-soak-'));
fs.mkdirSync(OUT, { recursive: true });

const MB = 2 ** 20;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const pick = <T>(xs: T[]): T => xs[Math.floor(Math.random() * xs.length)];

// --- the service, with an inspector to collect and measure its heap ---------

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-soak-data-'));
fs.chmodSync(dataDir, 0o755);
const child = spawn(process.execPath, ['--inspect=127.0.0.1:0', '--import', `${ROOT}node_modules/tsx/dist/loader.mjs`, `${ROOT}src/main.ts`], {
  cwd: ROOT,
  // glibc's arenas capped as `npm start` caps them (docs/operations.md); MALLOC_ARENA_MAX=0 measures glibc's default.
  env: { ...process.env, PORT: '0', FORKLINE_DATA_DIR: dataDir, FORKLINE_LEASE_TTL_MS: '5000', MALLOC_ARENA_MAX: process.env.MALLOC_ARENA_MAX || '2' },
  stdio: ['ignore', 'pipe', 'pipe'],
});
let output = '';
const log = fs.createWriteStream(path.join(OUT, 'service.log'));
const keep = (c: Buffer) => {
  output = (output + c).slice(-20_000); // its tail, for errors; the whole in service.log
  log.write(c);
};
child.stdout!.on('data', keep);
child.stderr!.on('data', keep);
const exited = new Promise<number | null>((r) => child.on('exit', (code) => r(code)));
// A soak that fails (the service never served, an error) takes its service down with it.
process.on('exit', () => child.exitCode === null && child.kill('SIGTERM'));

async function outputMatch(re: RegExp, what: string): Promise<RegExpMatchArray> {
  const deadline = Date.now() + 180_000;
  for (;;) {
    const m = output.match(re);
    if (m) return m;
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`no ${what}:\n${output.slice(-3000)}`);
    await sleep(100);
  }
}

/** A Chrome DevTools Protocol session on the service's inspector. */
async function inspector(url: string) {
  const ws = new WebSocket(url);
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  let nextId = 1;
  const waiting = new Map<number, { resolve: (v: any) => void; reject: (e: Error) => void }>();
  ws.on('message', (raw) => {
    const msg = JSON.parse(String(raw));
    const w = msg.id !== undefined ? waiting.get(msg.id) : undefined;
    if (!w) return;
    waiting.delete(msg.id);
    if (msg.error) w.reject(new Error(JSON.stringify(msg.error)));
    else w.resolve(msg.result);
  });
  const send = (method: string, params: object = {}) =>
    new Promise<any>((resolve, reject) => {
      const id = nextId++;
      waiting.set(id, { resolve, reject });
      ws.send(JSON.stringify({ id, method, params }));
    });
  const evaluate = async (expression: string) => (await send('Runtime.evaluate', { expression, returnByValue: true })).result.value;
  return {
    /** Two full collections, then process.memoryUsage(): the heap's floor and RSS. */
    async floor(): Promise<NodeJS.MemoryUsage> {
      await send('HeapProfiler.collectGarbage');
      await send('HeapProfiler.collectGarbage');
      return JSON.parse(await evaluate('JSON.stringify(process.memoryUsage())'));
    },
    /** What V8 itself has malloced (outside its heap), now and at most. */
    malloced: async (): Promise<{ malloced_memory: number; peak_malloced_memory: number }> =>
      JSON.parse(await evaluate(`JSON.stringify(process.getBuiltinModule('v8').getHeapStatistics())`)),
    snapshot: (file: string) => evaluate(`process.getBuiltinModule('v8').writeHeapSnapshot(${JSON.stringify(file)})`),
    close: () => ws.close(),
  };
}

const inspectorUrl = (await outputMatch(/Debugger listening on (ws:\/\/\S+)/, 'inspector'))[1];
const url = (await outputMatch(/serving GraphQL and GraphiQL at (http:\/\/\S+)/, 'GraphQL URL'))[1];
const heap = await inspector(inspectorUrl);
console.log(`soak: ${MINUTES} min against ${url}, samples every ${SAMPLE_MS / 1000} s into ${OUT}`);

// --- the load ----------------------------------------------------------------

const counts = new Map<string, number>();
const count = (what: string) => counts.set(what, (counts.get(what) ?? 0) + 1);

async function gql(query: string, variables?: object): Promise<any> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
  const body = (await res.json().catch(() => ({}))) as { data?: any; errors?: Array<{ message: string; extensions?: { code?: string } }> };
  if (body.errors?.length) {
    count(`error ${body.errors[0].extensions?.code ?? body.errors[0].message.slice(0, 60)}`);
    return undefined;
  }
  count(query.match(/^\s*(?:query|mutation)[^{]*\{\s*(\w+)/)?.[1] ?? 'other');
  return body.data;
}

const createSession = async (title: string) =>
  (await gql('mutation($t: String!) { createSession(input: { title: $t }) { id } }', { t: title }))?.createSession.id as string | undefined;

async function waitIdle(id: string, deadlineMs = 60_000) {
  const deadline = Date.now() + deadlineMs;
  while (Date.now() < deadline) {
    const s = (await gql('query($id: ID!) { session(id: $id) { status pendingInputs { inputId } } }', { id }))?.session;
    if (!s || (s.status === 'IDLE' && s.pendingInputs.length === 0)) return;
    await sleep(150);
  }
  count('turn not idle within 60 s');
}

/** A message whose scripted answer calls tools over two steps (docs/agents.md). */
const toolTurn = (n: number) =>
  [
    `message ${n}: ${'lorem ipsum '.repeat(20 + (n % 40))}`,
    '!call clock',
    `!call note_write {"key":"k${n % 50}","value":"${'v'.repeat(200)}"}`,
    `!call write_file {"path":"notes/f${n % 20}.md","content":"${`line ${n}\\n`.repeat(30)}"}`,
    '!then',
    `!call note_read {"key":"k${n % 50}"}`,
    `!call read_file {"path":"notes/f${n % 20}.md"}`,
  ].join('\n');

const live: string[] = []; // sessions turns go to (recent ones; older ones stay in the database)
const made: string[] = []; // every session made, oldest first (SOAK_MAX_SESSIONS)
const remember = (id: string | undefined) => {
  if (!id) return;
  live.push(id);
  made.push(id);
  if (live.length > 24) live.shift();
};

/** With SOAK_MAX_SESSIONS: deletes the oldest sessions with their forks, as a user clearing old work would. */
async function janitor() {
  const deleted = new Set<string>();
  while (running) {
    await sleep(5000);
    while (MAX_SESSIONS !== undefined && made.length - deleted.size > MAX_SESSIONS && running) {
      const id = made.shift()!;
      if (deleted.has(id)) {
        deleted.delete(id);
        continue;
      }
      const i = live.indexOf(id);
      if (i >= 0) live.splice(i, 1);
      const r = await gql('mutation($id: ID!) { deleteSession(id: $id, withDescendants: true) { deletedSessionIds } }', { id });
      for (const gone of r?.deleteSession.deletedSessionIds ?? []) if (gone !== id) deleted.add(gone);
      for (const gone of r?.deleteSession.deletedSessionIds ?? []) if (live.includes(gone)) live.splice(live.indexOf(gone), 1);
    }
  }
}

let running = true;

async function worker(w: number) {
  for (let n = 0; running; n++) {
    try {
      if (live.length < 4 || n % 25 === 0) remember(await createSession(`soak ${w}.${n}`));
      const id = pick(live);
      await gql('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId: id, text: toolTurn(n) } });
      await waitIdle(id);
      // Reads, as the dashboard and clients make them.
      await gql('query($id: ID!) { session(id: $id) { eventCount status lastTurn { reason } events(last: 30) { edges { node { seq type data } } } } }', { id });
      await gql('query($id: ID!) { session(id: $id) { files { path size } fileChanges(fromSeq: -1) { path } workspace { key } totals { turns } } }', { id });
      await gql('query { sessions(first: 50) { edges { node { id title status eventCount } } } }');
      if (n % 4 === 1) {
        const fork = await gql('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', {
          i: { sessionId: id, message: toolTurn(n + 1) },
        });
        const childId = fork?.forkSession.session.id;
        if (childId) {
          await waitIdle(childId);
          await gql('query($a: ID!, $b: ID!) { session(id: $a) { commonPrefix(with: $b) family(first: 20) { edges { node { id } } } } }', {
            a: childId,
            b: id,
          });
          remember(childId);
        }
      }
      if (n % 6 === 2) {
        const recording = (await gql('query($id: ID!) { session(id: $id) { recording } }', { id }))?.session.recording;
        if (recording) remember((await gql('mutation($r: String!) { importRecording(recording: $r) { id } }', { r: recording }))?.importRecording.id);
      }
      if (n % 8 === 3) await gql('mutation($i: CompactSessionInput!) { compactSession(input: $i) { summarySeq } }', { i: { sessionId: id } });
      if (n % 10 === 4) await gql('query { searchSessions(query: "lorem", first: 20) { edges { node { kind session { id } } } } }');
    } catch (err) {
      count(`thrown ${String(err).slice(0, 80)}`);
      await sleep(500);
    }
  }
}

/** Subscribers that come and go: sessionEvents from the start, sessionTurns live, each held 5-20 s. */
async function subscriber() {
  while (running) {
    const id = live.length ? pick(live) : undefined;
    if (!id) {
      await sleep(500);
      continue;
    }
    const client = createClient({ url: url.replace(/^http/, 'ws'), webSocketImpl: WebSocket, retryAttempts: 0, lazy: true });
    const until = Date.now() + 5_000 + Math.random() * 15_000;
    const consume = async (query: string) => {
      try {
        for await (const r of client.iterate({ query, variables: { id } })) {
          count(r.errors ? 'subscription error' : 'subscription event');
          if (Date.now() > until || !running) break;
        }
      } catch {
        count('subscription closed');
      }
    };
    const both = Promise.all([
      consume('subscription($id: ID!) { sessionEvents(sessionId: $id, afterSeq: -1) { seq type } }'),
      consume('subscription($id: ID!) { sessionTurns(sessionId: $id) { kind } }'),
    ]);
    await sleep(Math.max(0, until - Date.now()));
    await client.dispose();
    await both;
  }
}

/** One long-lived sessionsChanged subscriber, as a dashboard keeps. */
async function dashboard() {
  const client = createClient({ url: url.replace(/^http/, 'ws'), webSocketImpl: WebSocket, retryAttempts: 5, lazy: true });
  try {
    for await (const _ of client.iterate({ query: 'subscription { sessionsChanged { id eventCount } }' })) {
      count('sessionsChanged');
      if (!running) break;
    }
  } catch {
    count('dashboard subscription closed');
  }
  await client.dispose();
}

// --- sampling ----------------------------------------------------------------

interface Sample {
  minute: number;
  rssMB: number;
  heapUsedMB: number;
  heapTotalMB: number;
  externalMB: number;
  arrayBuffersMB: number;
  /** V8's own mallocs (getHeapStatistics().malloced_memory). */
  v8MallocedMB: number;
  /** Where RSS is (bench/process-memory.ts). */
  resident?: ResidentBreakdown;
}
const samples: Sample[] = [];
const started = Date.now();
const samplesFile = fs.createWriteStream(path.join(OUT, 'samples.jsonl'));

async function sample() {
  const m = await heap.floor();
  const v8 = await heap.malloced();
  const s: Sample = {
    minute: Math.round(((Date.now() - started) / 60_000) * 100) / 100,
    rssMB: Math.round((m.rss / MB) * 10) / 10,
    heapUsedMB: Math.round((m.heapUsed / MB) * 10) / 10,
    heapTotalMB: Math.round((m.heapTotal / MB) * 10) / 10,
    externalMB: Math.round((m.external / MB) * 10) / 10,
    arrayBuffersMB: Math.round((m.arrayBuffers / MB) * 10) / 10,
    v8MallocedMB: Math.round((v8.malloced_memory / MB) * 10) / 10,
    resident: residentBreakdown(child.pid!),
  };
  samples.push(s);
  samplesFile.write(`${JSON.stringify({ ...s, counts: Object.fromEntries(counts) })}\n`);
  const r = s.resident;
  console.log(
    `soak: ${s.minute.toFixed(1)} min  rss ${s.rssMB} MB  heap floor ${s.heapUsedMB} MB of ${s.heapTotalMB} (external ${s.externalMB} MB)` +
      (r ? `  malloc arenas ${r.arenasMB} MB in ${r.arenaHeaps}, main ${r.brkHeapMB} MB` : ''),
  );
}

const load = [...Array.from({ length: WORKERS }, (_, w) => worker(w)), subscriber(), subscriber(), dashboard(), janitor()];
const snapshots = [...SNAPSHOT_MINUTES];
await sample();
while (Date.now() - started < MINUTES * 60_000 - 1000) {
  await sleep(Math.min(SAMPLE_MS, Math.max(0, started + MINUTES * 60_000 - Date.now())));
  if (child.exitCode !== null) throw new Error(`the service exited:\n${output.slice(-3000)}`);
  await sample();
  while (snapshots.length && (Date.now() - started) / 60_000 >= snapshots[0]) {
    const file = path.join(OUT, `heap-${snapshots.shift()}min.heapsnapshot`);
    await heap.snapshot(file);
    console.log(`soak: wrote ${file}`);
  }
}
running = false;
await Promise.race([Promise.all(load), sleep(30_000)]);

// --- verdict -----------------------------------------------------------------

/** The lowest value among the samples of the first and of the last `spanMinutes` of the window, and the least-squares slope over it. */
function floorGrowth(value: (s: Sample) => number | undefined) {
  const end = samples.at(-1)!.minute;
  const window = samples.filter((s) => s.minute >= end - WINDOW_MINUTES && value(s) !== undefined);
  const v = (s: Sample) => value(s)!;
  const span = Math.max(WINDOW_MINUTES / 8, 1);
  const first = Math.min(...window.filter((s) => s.minute <= window[0].minute + span).map(v));
  const last = Math.min(...window.filter((s) => s.minute >= end - span).map(v));
  // MB per minute.
  const mx = window.reduce((a, s) => a + s.minute, 0) / window.length;
  const my = window.reduce((a, s) => a + v(s), 0) / window.length;
  const slope = window.reduce((a, s) => a + (s.minute - mx) * (v(s) - my), 0) / window.reduce((a, s) => a + (s.minute - mx) ** 2, 0);
  return { first, last, growth: last / first - 1, slope };
}
const heapFloor = floorGrowth((s) => s.heapUsedMB);
const rss = floorGrowth((s) => s.rssMB);
// Where RSS went: V8's heap as committed (not only its live floor), glibc's malloc heaps, the rest (bench/process-memory.ts).
const rssParts = {
  v8HeapCommitted: floorGrowth((s) => s.heapTotalMB),
  threadArenas: floorGrowth((s) => s.resident?.arenasMB),
  mainMallocHeap: floorGrowth((s) => s.resident?.brkHeapMB),
  otherAnonymous: floorGrowth((s) => s.resident && s.resident.otherAnonMB - s.heapTotalMB),
  files: floorGrowth((s) => s.resident?.fileMB),
};
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;
const mbs = (g: ReturnType<typeof floorGrowth>) => `${g.first.toFixed(1)} → ${g.last.toFixed(1)} MB (${g.slope.toFixed(2)} MB/min)`;
console.log(`soak: operations ${JSON.stringify(Object.fromEntries([...counts].sort()))}`);
console.log(
  `soak: over the last ${WINDOW_MINUTES.toFixed(0)} min the heap floor went ${heapFloor.first} → ${heapFloor.last} MB (${pct(heapFloor.growth)}, ${heapFloor.slope.toFixed(3)} MB/min), RSS ${rss.first} → ${rss.last} MB (${pct(rss.growth)}, ${rss.slope.toFixed(3)} MB/min)`,
);
console.log(
  `soak: RSS by part: V8 heap committed ${mbs(rssParts.v8HeapCommitted)}, malloc thread arenas ${mbs(rssParts.threadArenas)}, ` +
    `main malloc heap ${mbs(rssParts.mainMallocHeap)}, other anonymous ${mbs(rssParts.otherAnonymous)}, files ${mbs(rssParts.files)}`,
);
const flat = heapFloor.growth < 0.1;
console.log(`soak: ${flat ? 'FLAT' : 'GROWING'}: the heap floor grew ${flat ? 'less than' : 'at least'} 10% over the window`);
fs.writeFileSync(
  path.join(OUT, 'result.json'),
  JSON.stringify({ minutes: MINUTES, windowMinutes: WINDOW_MINUTES, heapFloor, rss, rssParts, flat, counts: Object.fromEntries(counts) }, null, 2),
);

heap.close();
child.kill('SIGTERM');
await exited;
fs.rmSync(dataDir, { recursive: true, force: true });
process.exit(flat ? 0 : 1);
