// The doors a hostile tenant hands file change sets through (docs/files.md):
// a recording (POST /recordings and importRecording), a runner's appendEvents
// under a claimed lease. Shared by the hostile-* suites.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { FILES_CHANGE, type FileChangeRecord } from '../../src/core/file-tree.ts';
import { fileCallEvents } from '../helpers/file-calls.ts';
import type { TestApp } from '../helpers/app.ts';

export const sha256 = (bytes: Uint8Array | string) => createHash('sha256').update(bytes).digest('hex');

/** The events of one completed turn whose write_file call recorded `changes` (as forkline's agent appends them). */
export const fileTurn = fileCallEvents;

/** A recording of one file turn naming `changes`, carrying `blobs` (content lines after the events). */
export function recordingOf(changes: FileChangeRecord[], blobs: Uint8Array[] = []): string {
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_hostile', title: 'hostile' } }];
  fileTurn(1, changes).forEach((e, seq) => lines.push({ seq, ...e }));
  for (const b of blobs) lines.push({ blob: sha256(b), base64: Buffer.from(b).toString('base64') });
  return `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`;
}

export const recordingsUrl = (app: TestApp) => app.url.replace(/\/graphql$/, '/recordings');

export async function postRecording(app: TestApp, body: string, headers: Record<string, string> = {}) {
  const res = await fetch(recordingsUrl(app), { method: 'POST', headers: { 'content-type': 'application/x-ndjson', ...headers }, body });
  return { status: res.status, body: (await res.json()) as any };
}

export const importRecording = (app: TestApp, recording: string, headers: Record<string, string> = {}) =>
  app.gql(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: recording }, headers);

/** Counts a tenant's sessions (a refused import wrote none). */
export async function sessionCount(app: TestApp): Promise<number> {
  const { rows } = await app.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM "Session"');
  return rows[0].n;
}

/** A session of a runner pool, claimed, with one input waiting: [id, token, eventCount]. */
export async function claimedRunnerSession(
  app: TestApp,
  headers: Record<string, string> = {},
): Promise<{ id: string; token: number; eventCount: number; inputId: string }> {
  const created = await app.gql(`mutation { createSession(input: { title: "ext", runner: "ext" }) { id } }`, undefined, headers);
  const id = created.data.createSession.id as string;
  const sent = await app.gql(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "go" }) { inputId } }`, { id }, headers);
  const claimed = await app.gql(
    `mutation($id: ID!) { claimSession(input: {sessionId: $id, runnerId: "r1"}) { session { eventCount } lease { token } } }`,
    { id },
    headers,
  );
  return { id, token: claimed.data.claimSession.lease.token, eventCount: claimed.data.claimSession.session.eventCount, inputId: sent.data.sendMessage.inputId };
}

/** A runner's first batch of a write_file turn: the turn that takes the waiting input and the call, alone (docs/runners.md "Why the call goes first"). */
export function runnerFileCall(inputId: string, callId = 'c1') {
  return [
    { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
    { type: 'turn/start', data: { turn: 1, inputId } },
    { type: 'step/start', data: { turn: 1, step: 1 } },
    {
      type: 'model/message',
      data: { turn: 1, step: 1, text: '', toolCalls: [{ id: callId, name: 'write_file', arguments: '{}', effect: 'idempotent', files: 'only' }] },
    },
  ];
}

/** The runner's next batch, once the call ran: its change set and result, the ends. */
export function runnerFileBatch(changes: FileChangeRecord[], callId = 'c1') {
  return [
    { type: FILES_CHANGE, data: { callId, changes } },
    { type: 'tool/result', data: { turn: 1, step: 1, callId, resultId: `r-${callId}`, status: 'ok', content: 'wrote', name: 'write_file' } },
    { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
    { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
  ];
}

/** A claimed runner session whose write_file call is stored (runnerFileCall): `eventCount` is the log's length after it. */
export async function calledRunnerSession(app: TestApp, headers: Record<string, string> = {}): Promise<{ id: string; token: number; eventCount: number }> {
  const s = await claimedRunnerSession(app, headers);
  const r = await appendEvents(app, s, runnerFileCall(s.inputId), headers);
  if (r.errors) throw new Error(`the call's batch was refused: ${r.errors[0].message}`);
  return { id: s.id, token: s.token, eventCount: r.data.appendEvents.eventCount as number };
}

/** declareRunnerTools, answering the log's length after it. */
export const DECLARE_RUNNER_TOOLS = `mutation($input: DeclareRunnerToolsInput!) { declareRunnerTools(input: $input) { eventCount } }`;

export const appendEvents = (app: TestApp, s: { id: string; token: number; eventCount: number }, events: unknown[], headers: Record<string, string> = {}) =>
  app.gql(
    `mutation($input: AppendEventsInput!) { appendEvents(input: $input) { eventCount } }`,
    { input: { sessionId: s.id, leaseToken: s.token, expectedEventCount: s.eventCount, events } },
    headers,
  );

/** Every regular file and symlink under `dir`, relative to it. */
export function filesUnder(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else out.push(path.relative(dir, p));
    }
  };
  if (fs.existsSync(dir)) walk(dir);
  return out.sort();
}
