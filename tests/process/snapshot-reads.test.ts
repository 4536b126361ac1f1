// A session read is one snapshot (docs/contract.md#log): every field of a Session in one
// response describes the log as of its eventCount. Two service processes on one
// database; each message is sent through one of them and read back through
// both, right after the send and all through the turn its agent runs (in either
// process). No response may contradict itself: IDLE with nothing pending while
// the input just sent has no answer yet, turns or seqs past eventCount, a
// status the turns disagree with, a recording longer than the log it reports.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestDatabase } from '../helpers/db.ts';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';

const SESSIONS = 6;
const ROUNDS = 4;
/** Readers per session, hammering both processes while its inputs wait and its turns run. */
const READERS = 2;

const SESSION_FIELDS = `
  id status eventCount turnCount
  pendingInputs { inputId seq }
  turns { turn inputId startSeq endSeq reason }
  lastAnswer { seq turn }
  workspace { key seq }
  turnAt(seq: $probe) { turn startSeq endSeq }
`;
const READ = `query($id: ID!, $probe: Int!, $withRecording: Boolean!) {
  session(id: $id) { ${SESSION_FIELDS} recording @include(if: $withRecording) }
}`;
// The same through node(id) (Prisma's read of the row, not the prepared statement's).
const READ_NODE = `query($id: ID!, $probe: Int!, $withRecording: Boolean!) {
  session: node(id: $id) { ... on Session { ${SESSION_FIELDS} recording @include(if: $withRecording) } }
}`;
const SEND = `mutation($i: SendMessageInput!, $probe: Int!) {
  sendMessage(input: $i) { inputId event { seq } session { ${SESSION_FIELDS} } }
}`;

interface SessionView {
  status: 'IDLE' | 'RUNNING';
  eventCount: number;
  turnCount: number;
  pendingInputs: Array<{ inputId: string; seq: number }>;
  turns: Array<{ turn: number; inputId: string; startSeq: number; endSeq: number | null; reason: string | null }>;
  lastAnswer: { seq: number; turn: number } | null;
  workspace: Array<{ key: string; seq: number }>;
  turnAt: { turn: number; startSeq: number; endSeq: number | null } | null;
  recording?: string;
}

interface Sent {
  inputId: string;
  seq: number;
  key: string;
}

/**
 * What in one response contradicts the rest of it, or the inputs `sent` (each
 * queued, in this order, before the read began).
 */
function contradictions(s: SessionView, sent: Sent[], probe: number): string[] {
  const out: string[] = [];
  const n = s.eventCount;
  const seqs = [
    ...s.pendingInputs.map((p) => p.seq),
    ...s.turns.flatMap((t) => [t.startSeq, t.endSeq ?? -1]),
    s.lastAnswer?.seq ?? -1,
    ...s.workspace.map((w) => w.seq),
    s.turnAt?.startSeq ?? -1,
    s.turnAt?.endSeq ?? -1,
  ];
  if (seqs.some((q) => q >= n)) out.push(`a seq at or past eventCount ${n}`);
  if (s.turns.length !== s.turnCount) out.push(`${s.turns.length} turns, turnCount ${s.turnCount}`);
  const open = s.turns.filter((t) => t.endSeq === null);
  if (open.length > 1) out.push(`${open.length} open turns`);
  if ((s.status === 'RUNNING') !== (open.length === 1)) out.push(`${s.status} with ${open.length} open turns`);
  for (const input of sent) {
    if (n <= input.seq) out.push(`eventCount ${n} does not include the sent input's seq ${input.seq}`);
    const pending = s.pendingInputs.some((p) => p.inputId === input.inputId);
    const turn = s.turns.find((t) => t.inputId === input.inputId);
    if (pending === Boolean(turn)) out.push(`input ${input.key} is ${pending ? 'both pending and in a turn' : 'neither pending nor in a turn'}`);
    if (s.status === 'IDLE' && s.pendingInputs.length === 0) {
      // What a client waiting for "idle, nothing pending" takes as done: its answers are there.
      if (!turn || turn.endSeq === null) out.push(`IDLE with nothing pending, input ${input.key} has no finished turn`);
      else if (turn.reason !== 'completed') out.push(`the turn of input ${input.key} ended ${turn.reason}`);
      if (!s.workspace.some((w) => w.key === input.key)) out.push(`IDLE with nothing pending, the workspace write ${input.key} is missing`);
    }
  }
  const last = s.turns.find((t) => t.inputId === sent.at(-1)?.inputId);
  if (s.status === 'IDLE' && s.pendingInputs.length === 0 && last && s.lastAnswer?.turn !== last.turn) {
    out.push(`IDLE with nothing pending, lastAnswer is not of turn ${last.turn}`);
  }
  const holding = s.turns.find((t) => t.startSeq <= probe && (t.endSeq ?? n - 1) >= probe);
  if (
    probe >= n ? s.turnAt !== null : (holding?.startSeq ?? null) !== (s.turnAt?.startSeq ?? null) || (holding?.endSeq ?? null) !== (s.turnAt?.endSeq ?? null)
  ) {
    out.push(`turnAt(${probe}) ${JSON.stringify(s.turnAt)} disagrees with turns`);
  }
  if (s.recording !== undefined) {
    const lines = s.recording.split('\n').filter(Boolean).length;
    if (lines !== n + 1) out.push(`a recording of ${lines - 1} events, eventCount ${n}`);
  }
  return out;
}

const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-snapshot-'));
const running: ServiceProcess[] = [];
afterAll(async () => {
  await Promise.all(running.map((p) => p.stop('SIGKILL')));
  fs.rmSync(dataDir, { recursive: true, force: true });
});

describe('snapshot reads across two processes', () => {
  let a: ServiceProcess;
  let b: ServiceProcess;
  beforeAll(async () => {
    const databaseUrl = await createTestDatabase();
    const env = { DATABASE_URL: databaseUrl, FORKLINE_DATA_DIR: dataDir, FORKLINE_RATE_LIMIT_RPS: '0' };
    [a, b] = await Promise.all([startService({ env }), startService({ env })]);
    running.push(a, b);
  });

  it('read-after-send and read-during-turn never contradict themselves', async () => {
    const gql = async (p: ServiceProcess, query: string, variables: unknown) => {
      const r = await postGraphQL(p.url, query, variables);
      if (r.status !== 200 || r.body.errors) throw new Error(`${r.status} ${JSON.stringify(r.body).slice(0, 500)}`);
      return r.body.data;
    };
    const found: string[] = [];
    const note = (where: string, s: SessionView, sent: Sent[], probe: number) => {
      for (const c of contradictions(s, sent, probe)) found.push(`${where}: ${c} (${JSON.stringify({ ...s, recording: undefined })})`);
    };
    let reads = 0;
    let running = 0;
    let waiting = 0;
    const ids: string[] = [];
    for (let i = 0; i < SESSIONS; i++) ids.push((await gql(a, 'mutation { createSession(input: { title: "snapshot" }) { id } }', {})).createSession.id);

    await Promise.all(
      ids.map(async (id, i) => {
        for (let m = 0; m < ROUNDS; m++) {
          // A probe seq just past what is there: the round's first turn starts about there.
          const probe = ((await gql(a, READ, { id, probe: 0, withRecording: false })).session as SessionView).eventCount + 2;
          // Two inputs back to back, through the two processes: the first turn takes three steps
          // (a workspace write, a short sleep, the answer), so the second input waits in the inbox
          // while it runs, and reads land before, during and after each turn.
          const texts = [
            `round ${m} first\n!call note_write {"key": "a${m}", "value": "v"}\n!then\n!call sleep {"ms": 100}`,
            `round ${m} second\n!call note_write {"key": "b${m}", "value": "v"}`,
          ];
          const sent: Sent[] = [];
          for (const [k, text] of texts.entries()) {
            const via = (i + m + k) % 2 ? b : a;
            const r = (await gql(via, SEND, { i: { sessionId: id, text }, probe })).sendMessage;
            sent.push({ inputId: r.inputId, seq: r.event.seq, key: `${'ab'[k]}${m}` });
            note('sendMessage payload', r.session, sent, probe);
          }
          // Readers on both processes until one sees "idle, nothing pending".
          let done = false;
          await Promise.all(
            Array.from({ length: READERS }, async (_, k) => {
              for (let n = 0; !done; n++) {
                const p = (k + n) % 2 ? a : b;
                const s = (await gql(p, n % 3 === 2 ? READ_NODE : READ, { id, probe, withRecording: n % 4 === 3 })).session as SessionView;
                reads++;
                if (s.status === 'RUNNING') running++;
                if (s.pendingInputs.length > 0) waiting++;
                note(p === a ? 'read from A' : 'read from B', s, sent, probe);
                if (s.status === 'IDLE' && s.pendingInputs.length === 0) done = true;
              }
            }),
          );
        }
      }),
    );
    // The reads landed while inputs waited and while turns ran, not only once all was done.
    expect({ running: running > 0, waiting: waiting > 0 }, `${reads} reads: ${running} running, ${waiting} with the input waiting`).toEqual({
      running: true,
      waiting: true,
    });
    expect(found.slice(0, 5), `${found.length} contradictory responses in ${reads} reads`).toEqual([]);
  }, 180_000);
});
