// The same rules at every door (docs/contract.md#append-rules, docs/operations.md
// "Threat model"): logs forkline's own agent wrote, mutated by a hostile
// generator (hostile-logs.ts), go through every door that takes an event
// sequence — a recording whole through POST /recordings and importRecording,
// and a runner's appendEvents in pieces (the service writing what is the
// service's: inputs, decisions, repair's closers; a piece ends after each call's
// model/message, as rule `call first` asks). Each door gives the same
// verdict with the same error code (and, where both name one, the same rule at
// the same seq), stores the same events, and every accepted log reads back,
// exports and imports again, forks at every seq, and repairs (the shared
// repair function, every cause, every prefix) into a log the rules accept.
// Fixed seed, bounded runs (FUZZ_SEED and FUZZ_RUNS replay or widen it).
import fc from 'fast-check';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ForklineError } from '../../src/core/errors.ts';
import { foldLog } from '../../src/core/log-state.ts';
import { closeOpenTail, type RepairCause } from '../../src/core/repair.ts';
import { MAX_JSON_DEPTH, MAX_JSON_KEYS, MAX_JSON_VALUES, MAX_PAYLOAD_KEYS } from '../../src/core/storable.ts';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { makesCalls } from '../helpers/runner-batches.ts';
import { wsOperation, type WsOperationOutcome } from '../helpers/subscribe.ts';
import { mutate, planArb, writtenByService, type HostileEvent, type HostileLog, type Plan } from './hostile-logs.ts';

const SEED = Number(process.env.FUZZ_SEED ?? 20261219);
const RUNS = Number(process.env.FUZZ_RUNS ?? 60);
const POOL = 'doors-fuzz';
const scope = { tenant: 'local' };

let app: TestApp;
let bases: HostileEvent[][] = [];

const SEND = `mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`;
const CREATE = `mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`;

async function logOf(id: string): Promise<HostileEvent[]> {
  const events = await app.services.store.log.page(id, -1, 10_000);
  return events.map((e) => ({
    seq: e.seq,
    type: e.type,
    data: e.data,
    ...(e.synthetic ? { synthetic: true } : {}),
    ...(e.inherited ? { inherited: true } : {}),
  }));
}

async function agentSession(input: Record<string, unknown>, messages: string[], decide?: 'approve' | 'deny'): Promise<string> {
  const id = (await app.ok(CREATE, { i: input })).createSession.id as string;
  for (const text of messages) {
    await app.ok(SEND, { i: { sessionId: id, text } });
    await app.services.host.idle();
    if (!decide) continue;
    const waiting = (await app.ok(`query($id: ID!) { session(id: $id) { pendingApprovals { callId } } }`, { id })).session.pendingApprovals;
    for (const { callId } of waiting) {
      await app.ok(`mutation($i: ToolDecisionInput!) { ${decide}ToolCall(input: $i) { id } }`, { i: { sessionId: id, callId, reason: 'fuzz' } });
      await app.services.host.idle();
    }
  }
  return id;
}

beforeAll(async () => {
  app = await startTestApp();
  // Valid logs, each written by forkline's own agent loop (the scripted model: tool calls on cue).
  const write = (key: string) => `!call note_write ${JSON.stringify({ key, value: 'v' })}`;
  const tools = await agentSession({ title: 'tools' }, [
    'hello',
    `!call clock {}\n${write('a')}\n!then\n!call note_read {"key":"a"}`,
    '!call note_read {"key":"missing"}',
  ]);
  const approved = await agentSession({ approvalRequired: ['note_write'] }, [`${write('b')}\n!call clock {}`, write('c')], 'approve');
  const denied = await agentSession({ approvalRequired: ['note_write'] }, [write('d')], 'deny');
  const failed = await agentSession({ instructions: 'be brief' }, ['!fail the model broke', 'again']);
  // A child forked inside a step with a call in flight (its prefix inherited, its marker, the fork's closers), then continued.
  const toolsLog = await logOf(tools);
  const cut = toolsLog.findIndex((e) => e.type === 'model/message' && (e.data as { toolCalls: unknown[] }).toolCalls.length > 1);
  const child = (await app.services.controller.forkSession(scope, tools, cut)).session.id;
  await app.ok(SEND, { i: { sessionId: child, text: 'and now?' } });
  await app.services.host.idle();
  bases = [toolsLog, await logOf(approved), await logOf(denied), await logOf(failed), await logOf(child)];
}, 60_000);
afterAll(() => app?.close());

/** What a door said: accepted (the session it made), or refused with a code and, for a broken rule, the rule and the seq. */
interface Verdict {
  accepted: boolean;
  sessionId?: string;
  code?: string;
  rule?: string;
  seq?: number;
  message?: string;
}

function recordingOf(events: HostileEvent[]): string {
  const header = { format: 'forkline.recording', version: 4, session: { id: 'ses_fuzz', title: 'fuzz', runner: POOL } };
  return [header, ...events].map((l) => JSON.stringify(l)).join('\n') + '\n';
}

/** "line N: rule: …" as a rule and the seq of that line. */
function ruleOfMessage(message: string): { rule?: string; seq?: number } {
  const m = /^line (\d+): ([^:]+):/.exec(message);
  return m ? { rule: m[2], seq: Number(m[1]) - 2 } : {};
}

async function uploadDoor(log: HostileLog): Promise<Verdict> {
  const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
    method: 'POST',
    headers: { 'content-type': 'application/x-ndjson' },
    body: recordingOf(log.events),
  });
  const body = (await res.json()) as any;
  if (res.status === 201) return { accepted: true, sessionId: body.session.id };
  const error = body.errors[0];
  return { accepted: false, code: error.extensions?.code, message: error.message, ...ruleOfMessage(error.message) };
}

async function importDoor(log: HostileLog): Promise<Verdict> {
  const r = await app.gql(`mutation($r: String!) { importRecording(recording: $r) { id } }`, { r: recordingOf(log.events) });
  if (!r.errors) return { accepted: true, sessionId: r.data.importRecording.id };
  const error = r.errors[0];
  return { accepted: false, code: error.extensions?.code, message: error.message, ...ruleOfMessage(error.message) };
}

/**
 * A runner session of the pool, claimed: the service writes its events, the runner the rest in pieces cut where the
 * plan says, and after each model/message that makes calls. The log is the one the recording doors take; only its
 * batching is a runner's: a call is in the log before its result (rule `call first`, docs/runners.md "Why the call
 * goes first"), so a batch holding both would be refused by appendEvents alone.
 */
async function runnerDoor(log: HostileLog, plan: Plan): Promise<Verdict> {
  const id = (await app.ok(CREATE, { i: { runner: POOL } })).createSession.id as string;
  const token = (
    await app.ok(`mutation($i: ClaimSessionInput!) { claimSession(input: $i) { lease { token } } }`, {
      i: { sessionId: id, runnerId: 'fuzz', leaseMs: 600_000 },
    })
  ).claimSession.lease.token;
  const refused = (code: string, details: Record<string, unknown> | undefined, message: string): Verdict => ({
    accepted: false,
    code,
    message,
    ...(typeof details?.rule === 'string' ? { rule: details.rule } : {}),
    ...(typeof details?.seq === 'number' ? { seq: details.seq } : {}),
  });
  let cut = 0;
  for (let i = 0; i < log.events.length;) {
    const service = writtenByService(log.events[i]);
    let j = i + 1;
    if (service) while (j < log.events.length && writtenByService(log.events[j])) j++;
    else {
      const size = plan.cuts[cut++ % plan.cuts.length];
      while (j < log.events.length && j - i < size && !writtenByService(log.events[j]) && !makesCalls(log.events[j - 1])) j++;
    }
    const run = log.events.slice(i, j);
    if (service) {
      try {
        await app.services.store.append(
          id,
          run.map(({ type, data, synthetic }) => ({ type, data, synthetic })),
          { scope, expectedEventCount: i },
        );
      } catch (err) {
        if (!(err instanceof ForklineError)) return { accepted: false, code: 'INTERNAL_SERVER_ERROR', message: String(err) };
        return refused(err.code, err.details, err.message);
      }
    } else {
      const r = await app.gql(`mutation($i: AppendEventsInput!) { appendEvents(input: $i) { eventCount } }`, {
        i: { sessionId: id, leaseToken: token, expectedEventCount: i, events: run.map(({ type, data }) => ({ type, data })) },
      });
      if (r.errors) return refused(r.errors[0].extensions?.code, r.errors[0].extensions, r.errors[0].message);
    }
    i = j;
  }
  return { accepted: true, sessionId: id };
}

const REPLAY = `query($id: ID!) { session(id: $id) {
  status eventCount turnCount lastTurnFailed recording forkPoints { seq childCount }
  lastAnswer { seq turn step text toolCallCount } lastTurn { turn reason durationMs }
  turns { turn reason inputId error startedAt endedAt durationMs steps { step reason toolCallCount durationMs } }
  pendingInputs { inputId } pendingApprovals { callId name }
  totals { turns steps toolCalls inputTokens outputTokens turnMs }
  modelRequest { turn step inTurn stepOpen eventCount messages openCalls { id name } }
  events(first: 500) { edges { node { seq type data synthetic inherited } } }
} }`;

/** What went wrong with an accepted log: its read, its export imported again, a fork at each seq, repair at each prefix. */
async function acceptedProblems(id: string, submitted: number): Promise<string[]> {
  const problems: string[] = [];
  const read = await app.gql(REPLAY, { id });
  if (read.errors) return [`read: ${JSON.stringify(read.errors).slice(0, 400)}`];
  const session = read.data.session;
  if (session.eventCount < submitted) problems.push(`eventCount ${session.eventCount} < ${submitted} submitted`);
  const again = await app.gql(`mutation($r: String!) { importRecording(recording: $r) { id eventCount } }`, { r: session.recording });
  if (again.errors) problems.push(`its recording does not import again: ${again.errors[0].message}`);
  else if (again.data.importRecording.eventCount !== session.eventCount) problems.push('its recording imports with another length');
  const events: HostileEvent[] = session.events.edges.map((e: { node: HostileEvent }) => e.node);
  for (let seq = 0; seq < session.eventCount; seq++) {
    try {
      await app.services.controller.forkSession(scope, id, seq);
    } catch (err) {
      problems.push(`fork at ${seq}: ${(err as Error).message}`);
      break;
    }
  }
  const causes: RepairCause[] = [
    { kind: 'interrupted', sessionId: id },
    { kind: 'failed', sessionId: id, message: 'fuzz' },
    { kind: 'forked', parentSessionId: id, cutSeq: 0 },
  ];
  for (let end = 1; end <= events.length; end++) {
    const prefix = events.slice(0, end);
    for (const cause of causes) {
      const state = foldLog(prefix);
      for (const closer of closeOpenTail(prefix, cause, () => undefined)) {
        const broken = state.violation({ ...closer, seq: state.nextSeq });
        if (broken) {
          problems.push(`repair (${cause.kind}) after seq ${end - 1}: ${broken.rule}: ${broken.detail}`);
          break;
        }
        state.apply({ ...closer, seq: state.nextSeq });
      }
    }
  }
  return problems;
}

const stored = async (id: string, n: number) =>
  (await app.services.store.log.page(id, -1, n)).slice(0, n).map((e) => ({ type: e.type, data: e.data, synthetic: e.synthetic }));
/** Plans that found a disagreement once, kept whatever the seed (bases: 0 tools, 1 approved, 2 denied, 3 failed, 4 a fork's child). */
const PINNED: Plan[] = [
  // A runner's declared effect other than the one its call carries: appendEvents refused it, a recording relabelled the call.
  { base: 1, mutations: [{ kind: 'declare-effect', a: 0, b: 0, c: 0 }], cuts: [3] },
  // Times Postgres cannot store (year 0; an offset past ±15:59): both recording doors failed with INTERNAL_SERVER_ERROR.
  { base: 0, mutations: [{ kind: 'created-at', a: 3, b: 2, c: 0 }], cuts: [1] },
  { base: 2, mutations: [{ kind: 'created-at', a: 0, b: 5, c: 0 }], cuts: [1] },
  // Times that run backwards or lie centuries apart: accepted, then Turn.durationMs and totals.turnMs were past a 32-bit Int.
  { base: 3, mutations: [{ kind: 'created-at', a: 14, b: 4, c: 0 }], cuts: [1] },
  { base: 4, mutations: [{ kind: 'created-at', a: 20, b: 1, c: 0 }], cuts: [1] },
  // A turn's last step numbered 2^53 - 1: accepted by every door, then the session's turns could not be read.
  { base: 3, mutations: [{ kind: 'step-number', a: 1, b: 6, c: 0 }], cuts: [2] },
];

/** The relationship rules of the one reducer (docs/contract.md#append-rules). */
const REDUCER_RULES = new Set([
  'turn bracket',
  'turn numbering',
  'step bracket',
  'step numbering',
  'call ids',
  'step calls',
  'result pairing',
  'unanswered call',
  'inbox',
  'surface range',
  'synthetic closer',
  'approval pairing',
]);
const brief = (v: Verdict) => (v.accepted ? 'accepted' : `${v.code}${v.rule ? ` ${v.rule}@${v.seq}` : ''}`);

describe(`hostile event sequences through every door (FUZZ_SEED=${SEED}, ${RUNS} runs)`, () => {
  it('each door accepts exactly what the others accept, and every accepted log replays, forks at every seq and repairs', async () => {
    const plans = [...PINNED, ...fc.sample(planArb(bases.length), { seed: SEED, numRuns: RUNS })];
    const disagreements: string[] = [];
    let accepted = 0;
    for (const plan of plans) {
      const log = mutate(bases, plan);
      const what = `base ${plan.base}: ${log.mutations.join('; ')}`;
      const verdicts: Array<[string, Verdict]> = [
        ['POST /recordings', await uploadDoor(log)],
        ['importRecording', await importDoor(log)],
      ];
      if (!log.recordingOnly) verdicts.push(['appendEvents', await runnerDoor(log, plan)]);
      const [first, ...others] = verdicts;
      for (const [door, v] of others) {
        // A runner's batch is checked whole (codecs, declared effects) before the reducer's rules event by event: where one
        // breaks both kinds, the doors may name different events of it. Where both name a rule of the reducer, it is the same one.
        const both = REDUCER_RULES.has(v.rule ?? '') && REDUCER_RULES.has(first[1].rule ?? '');
        const sameRule = !both || (v.rule === first[1].rule && v.seq === first[1].seq);
        if (v.accepted !== first[1].accepted || v.code !== first[1].code || !sameRule)
          disagreements.push(`${what}\n  ${first[0]}: ${brief(first[1])} ${first[1].message ?? ''}\n  ${door}: ${brief(v)} ${v.message ?? ''}`);
      }
      for (const [door, v] of verdicts) {
        if (!v.accepted && v.code !== 'BAD_USER_INPUT') disagreements.push(`${what}\n  ${door}: ${v.code} (not BAD_USER_INPUT): ${v.message}`);
      }
      const sessions = verdicts.filter(([, v]) => v.accepted).map(([door, v]) => [door, v.sessionId!] as const);
      if (sessions.length === 0) continue;
      accepted++;
      // The same events stored, whichever door wrote them.
      const [[firstDoor, firstId], ...rest] = sessions;
      const reference = await stored(firstId, log.events.length);
      for (const [door, id] of rest) {
        const got = await stored(id, log.events.length);
        if (JSON.stringify(got) !== JSON.stringify(reference)) disagreements.push(`${what}\n  ${door} stored other events than ${firstDoor}`);
      }
      for (const [door, id] of sessions.slice(0, 1)) {
        for (const p of await acceptedProblems(id, log.events.length)) disagreements.push(`${what}\n  accepted by ${door}: ${p}`);
      }
    }
    expect(disagreements).toEqual([]);
    // The generator does reach both sides: some mutated logs pass, most do not.
    expect(accepted).toBeGreaterThan(0);
    expect(accepted).toBeLessThan(plans.length);
  }, 120_000);
});

/** One graphql-ws message's bound (docs/operations.md "Requests and connections": one WebSocket message 1 MiB). */
const WS_MESSAGE_BYTES = 1024 * 1024;

/** A JSON object of `n` distinct keys (`k0`, `k1`, …), each holding 0. */
const distinctKeys = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i.toString(36)}`, 0]));
/** Arrays nested `levels` deep around a 1. */
const nested = (levels: number): unknown => (levels === 0 ? 1 : [nested(levels - 1)]);

/**
 * One payload at the bounds of what an event may hold (core/storable.ts: its JSON values, distinct keys, depth and
 * text), and the verdict every door must give it: a plugin event's data through a runner's appendEvents, a
 * recording's line (POST /recordings), the same two as graphql-ws messages (appendEvents, importRecording) and the
 * built-in writer (the store's append, which forkline's own agent writes through: an MCP server's result is kept as
 * such data).
 */
const PAYLOADS: Array<[string, () => unknown, boolean]> = [
  ['1 MiB of text', () => ({ text: 'x'.repeat(2 ** 20) }), true],
  ['text with a lone surrogate', () => ({ text: 'a\ud800b' }), false],
  ['text with a NUL', () => ({ text: 'a\u0000b' }), false],
  ['a key "__proto__"', () => JSON.parse('{"__proto__": {"x": 1}}'), false],
  [`arrays nested ${MAX_JSON_DEPTH} deep`, () => ({ a: nested(MAX_JSON_DEPTH - 1) }), true],
  [`arrays nested ${MAX_JSON_DEPTH + 1} deep`, () => ({ a: nested(MAX_JSON_DEPTH) }), false],
  // 1 (the object) + 1 (its key) + the array's items: exactly MAX_JSON_VALUES, then one more.
  [`${MAX_JSON_VALUES} JSON values`, () => ({ a: new Array(MAX_JSON_VALUES - 2).fill(0) }), true],
  [`${MAX_JSON_VALUES + 1} JSON values`, () => ({ a: new Array(MAX_JSON_VALUES - 1).fill(0) }), false],
  // An empty array is one value, as any other: 510,000 of them are well within the bound (and were twice as many to the text's count).
  ['510,000 empty arrays', () => ({ a: Array.from({ length: 510_000 }, () => []) }), true],
  [`${MAX_PAYLOAD_KEYS} distinct keys`, () => distinctKeys(MAX_PAYLOAD_KEYS), true],
  [`${MAX_JSON_KEYS + 1} distinct keys`, () => distinctKeys(MAX_JSON_KEYS + 1), false],
];

describe('one payload, every door (core/storable.ts bounds)', () => {
  it.each(PAYLOADS)(
    '%s: the same verdict from appendEvents and importRecording (HTTP and graphql-ws), a recording line and the built-in writer',
    async (_name, payload, accepted) => {
      const type = 'plugin/fuzz/bound';
      const data = payload();
      const verdicts: Record<string, boolean | string> = {};
      // A runner's batch.
      const runner = (await app.ok(CREATE, { i: { runner: POOL } })).createSession.id as string;
      const token = (
        await app.ok(`mutation($i: ClaimSessionInput!) { claimSession(input: $i) { lease { token } } }`, { i: { sessionId: runner, runnerId: 'fuzz' } })
      ).claimSession.lease.token;
      const body = `{"query":"mutation($i: AppendEventsInput!) { appendEvents(input: $i) { eventCount } }","variables":{"i":{"sessionId":${JSON.stringify(runner)},"leaseToken":${JSON.stringify(token)},"expectedEventCount":0,"events":[{"type":"${type}","data":${JSON.stringify(data)}}]}}}`;
      const res = await fetch(app.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      const r = (await res.json()) as any;
      verdicts.appendEvents = r.errors ? `${res.status} ${r.errors[0].message.slice(0, 200)}` : r.data.appendEvents.eventCount === 1;
      // A recording's line.
      const up = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson' },
        body: `${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_bound', title: null } })}\n{"seq":0,"type":"${type}","data":${JSON.stringify(data)}}\n`,
      });
      const u = (await up.json()) as any;
      verdicts.recording = up.status === 201 || `${up.status} ${u.errors[0].message.slice(0, 200)}`;
      // The built-in writer.
      const own = (await app.ok(CREATE, { i: { title: 'bound' } })).createSession.id as string;
      verdicts.builtIn = await app.services.store.append(own, [{ type, data }], { scope }).then(
        () => true,
        (err: Error) => `${(err as ForklineError).code} ${err.message.slice(0, 200)}`,
      );
      // The same runner batch, and the recording as importRecording's string, sent as graphql-ws subscribe messages: the
      // socket's own bound (one message of WS_MESSAGE_BYTES, closed 1009 past it) comes first, then the same verdict.
      const wsRunner = (await app.ok(CREATE, { i: { runner: POOL } })).createSession.id as string;
      const wsToken = (
        await app.ok(`mutation($i: ClaimSessionInput!) { claimSession(input: $i) { lease { token } } }`, { i: { sessionId: wsRunner, runnerId: 'fuzz' } })
      ).claimSession.lease.token;
      const wsVerdict = (o: WsOperationOutcome, ok: (data: any) => boolean) =>
        o.closed
          ? `closed ${o.closed.code} ${o.closed.reason}`
          : o.errors
            ? `${o.errors[0].extensions?.code} ${o.errors[0].message.slice(0, 200)}`
            : ok(o.data);
      const fits: Record<string, boolean> = {};
      const overWs = async (door: string, query: string, variables: Record<string, unknown>, ok: (data: any) => boolean) => {
        fits[door] = Buffer.byteLength(JSON.stringify({ id: '1', type: 'subscribe', payload: { query, variables } })) <= WS_MESSAGE_BYTES;
        const outcome = await wsOperation(app.url, query, variables);
        // A message past the socket's bound is closed 1009 (too big), whatever it holds; one within it never is.
        expect(outcome.closed?.code === 1009, `${door}: ${JSON.stringify(outcome.closed)}`).toBe(!fits[door]);
        verdicts[door] = wsVerdict(outcome, ok);
      };
      await overWs(
        'appendEventsWs',
        `mutation($i: AppendEventsInput!) { appendEvents(input: $i) { eventCount } }`,
        { i: { sessionId: wsRunner, leaseToken: wsToken, expectedEventCount: 0, events: [{ type, data }] } },
        (d) => d.appendEvents.eventCount === 1,
      );
      const recording = `${JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_bound', title: null } })}\n{"seq":0,"type":"${type}","data":${JSON.stringify(data)}}\n`;
      await overWs(
        'importRecordingWs',
        `mutation($r: String!) { importRecording(recording: $r) { eventCount } }`,
        { r: recording },
        (d) => d.importRecording.eventCount === 1,
      );
      // Nothing of a refused batch was stored.
      if (verdicts.appendEventsWs !== true) expect((await app.services.store.requireSession(scope, wsRunner)).eventCount).toBe(0);
      const expected = accepted
        ? { appendEvents: true, recording: true, builtIn: true, appendEventsWs: fits.appendEventsWs, importRecordingWs: fits.importRecordingWs }
        : { appendEvents: false, recording: false, builtIn: false, appendEventsWs: false, importRecordingWs: false };
      expect(Object.fromEntries(Object.entries(verdicts).map(([door, v]) => [door, v === true])), JSON.stringify(verdicts)).toEqual(expected);
      // An accepted one exports and imports again, byte for byte (but the header's id).
      if (!accepted) return;
      const text = await (await fetch(`${app.url.replace(/\/graphql$/, '/recordings')}?session=${own}`)).text();
      const back = await fetch(app.url.replace(/\/graphql$/, '/recordings'), {
        method: 'POST',
        headers: { 'content-type': 'application/x-ndjson' },
        body: text,
      });
      expect(back.status).toBe(201);
    },
    60_000,
  );
});
