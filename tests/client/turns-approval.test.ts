// sessionTurns and tool approval (docs/contract.md#tool-approval), through the
// typed graphql-ws client: a call that waits is announced (APPROVAL_REQUESTED
// with the tool and its arguments), its decision too (APPROVAL_DECIDED with
// decision, reason and who), live and replayed from any seq — including one in
// the middle of the turn, after the call was stored.
import { describe, expect, it } from 'vitest';
import { useClientApp } from '../helpers/client-app.ts';
import { waitFor } from '../helpers/wait.ts';
import { ApproveToolCallDocument, CreateSessionDocument, DenyToolCallDocument, SendMessageDocument, SessionTurnsDocument } from '@forkline/client';

const t = useClientApp();

const ARGS = JSON.stringify({ key: 'greeting', value: 'hello "there" ✓' });
const ASK = `!call note_write ${ARGS}`;

type Update = {
  kind: string;
  seq?: number | null;
  turn: number;
  step?: number | null;
  callId?: string | null;
  toolName?: string | null;
  arguments?: string | null;
  status?: string | null;
  decision?: string | null;
  reason?: string | null;
  by?: string | null;
};
type Sub = AsyncIterator<{ sessionTurns: Update }>;

/** Reads updates until one of `kind` arrives; returns them all in order. */
async function until(sub: Sub, kind: string): Promise<Update[]> {
  const out: Update[] = [];
  for (;;) {
    const r = await sub.next();
    if (r.done) throw new Error(`stream ended after ${JSON.stringify(out.map((u) => u.kind))}`);
    out.push(r.value.sessionTurns);
    if (r.value.sessionTurns.kind === kind) return out;
  }
}

async function waitingSession(): Promise<{ id: string; inputSeq: number }> {
  const { createSession } = await t.client.mutate(CreateSessionDocument, { input: { title: 'approvals', approvalRequired: ['note_write'] } });
  const { sendMessage } = await t.client.mutate(SendMessageDocument, { input: { sessionId: createSession.id, text: ASK } });
  return { id: createSession.id, inputSeq: sendMessage.event.seq };
}

const stored = (updates: Update[]) => updates.filter((u) => u.seq != null);

async function eventsOf(id: string): Promise<Array<{ seq: number; type: string }>> {
  const r = await t.app.ok(`query ($id: ID!) { session(id: $id) { events(first: 500) { edges { node { seq type } } } } }`, { id });
  return r.session.events.edges.map((e: { node: { seq: number; type: string } }) => e.node);
}

describe('sessionTurns and tool approval', () => {
  it('announces the waiting call and its approval, live, then replays both from any seq', async () => {
    const { id, inputSeq } = await waitingSession();
    const sub = t.client.subscribe(SessionTurnsDocument, { sessionId: id, afterSeq: inputSeq });
    const asked = (await until(sub, 'APPROVAL_REQUESTED')).at(-1)!;
    expect(asked).toMatchObject({ kind: 'APPROVAL_REQUESTED', turn: 1, step: 1, toolName: 'note_write', arguments: ARGS });
    expect(asked.callId).toMatch(/^call_/);

    await t.client.mutate(ApproveToolCallDocument, { input: { sessionId: id, callId: asked.callId!, reason: 'fine by me' } });
    const rest = await until(sub, 'TURN_ENDED');
    await sub.return?.();
    const decided = rest.find((u) => u.kind === 'APPROVAL_DECIDED');
    expect(decided).toMatchObject({
      turn: 1,
      step: 1,
      callId: asked.callId,
      toolName: 'note_write',
      arguments: ARGS,
      decision: 'approved',
      reason: 'fine by me',
    });
    expect(decided!.by).toBeTruthy();
    // The decision comes before the call's result, which the approval let run.
    expect(stored(rest).map((u) => u.kind)).toEqual(['APPROVAL_DECIDED', 'TOOL_FINISHED', 'STEP_ENDED', 'STEP_STARTED', 'STEP_ENDED', 'TURN_ENDED']);
    expect(rest.find((u) => u.kind === 'TOOL_FINISHED')).toMatchObject({ callId: asked.callId, status: 'ok' });

    // Replayed from the start: the same updates, each once, at the events' seqs.
    const events = await eventsOf(id);
    const requestSeq = events.find((e) => e.type === 'tool/approval-request')!.seq;
    const decisionSeq = events.find((e) => e.type === 'tool/approval')!.seq;
    const replay = t.client.subscribe(SessionTurnsDocument, { sessionId: id, afterSeq: -1 });
    const all = await until(replay, 'TURN_ENDED');
    await replay.return?.();
    expect(all.find((u) => u.kind === 'APPROVAL_REQUESTED')).toEqual({ ...asked, seq: requestSeq });
    expect(all.find((u) => u.kind === 'APPROVAL_DECIDED')).toEqual({ ...decided, seq: decisionSeq });

    // From a seq after the call was stored (and after the request): the log before it names the call.
    for (const after of [requestSeq - 1, requestSeq]) {
      const mid = t.client.subscribe(SessionTurnsDocument, { sessionId: id, afterSeq: after });
      const got = await until(mid, 'TURN_ENDED');
      await mid.return?.();
      const kinds = stored(got).map((u) => u.kind);
      expect(kinds[0]).toBe(after < requestSeq ? 'APPROVAL_REQUESTED' : 'APPROVAL_DECIDED');
      expect(got.find((u) => u.kind === 'APPROVAL_DECIDED')).toEqual({ ...decided, seq: decisionSeq });
      if (after < requestSeq) expect(got.find((u) => u.kind === 'APPROVAL_REQUESTED')).toEqual({ ...asked, seq: requestSeq });
    }
  });

  it('without afterSeq: a live subscriber sees the request and a denial, with its reason', async () => {
    const { createSession } = await t.client.mutate(CreateSessionDocument, { input: { title: 'live deny', approvalRequired: ['note_write'] } });
    // The earlier tests' subscriptions end over the socket while mutations go over HTTP: gone first, so the count below is this one's.
    await waitFor(() => t.app.services.live.stats().turns === 0, { what: 'no turn subscriber left' });
    const sub = t.client.subscribe(SessionTurnsDocument, { sessionId: createSession.id });
    const first = sub.next();
    await waitFor(() => t.app.services.live.stats().turns === 1, { what: 'registered' });
    await t.client.mutate(SendMessageDocument, { input: { sessionId: createSession.id, text: ASK } });
    const head = await first;
    const before = [head.value!.sessionTurns, ...(await until(sub, 'APPROVAL_REQUESTED'))];
    const asked = before.at(-1)!;
    expect(asked).toMatchObject({ toolName: 'note_write', arguments: ARGS });
    await t.client.mutate(DenyToolCallDocument, { input: { sessionId: createSession.id, callId: asked.callId!, reason: 'not now' } });
    const rest = await until(sub, 'TURN_ENDED');
    await sub.return?.();
    expect(rest.find((u) => u.kind === 'APPROVAL_DECIDED')).toMatchObject({
      callId: asked.callId,
      toolName: 'note_write',
      decision: 'denied',
      reason: 'not now',
    });
    expect(rest.find((u) => u.kind === 'TOOL_FINISHED')).toMatchObject({ callId: asked.callId, status: 'error' });
  });
});
