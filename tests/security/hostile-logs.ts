// Hostile event sequences (docs/operations.md "Threat model"): valid logs that
// forkline's own agent wrote, mutated as an attacker would — reordered,
// duplicated, dropped, with forged ids, results for calls of another turn or
// another session, approved calls started without a decision, turns ended
// twice, inherited prefixes and fork markers that claim a parent's events,
// seqs and timestamps out of order, huge or negative numbers, type names that
// differ in case or Unicode, payload keys outside the schema. Pure: a
// fast-check arbitrary of mutation plans and the function that applies one, so
// a failing sample replays from its seed (door-agreement.test.ts pushes each
// through every door that takes event sequences).
import fc from 'fast-check';

export interface HostileEvent {
  seq: number;
  type: string;
  data: unknown;
  synthetic?: boolean;
  inherited?: boolean;
  createdAt?: string;
}

/** A mutated log: its events, what was done to it, and whether only a recording can carry it (seqs, timestamps, a fork's prefix). */
export interface HostileLog {
  events: HostileEvent[];
  mutations: string[];
  recordingOnly: boolean;
}

const KINDS = [
  'swap',
  'move',
  'duplicate',
  'drop',
  'forge-id',
  'cross-turn-result',
  'cross-session',
  'approved-start',
  'undecided-start',
  'turn-end-twice',
  'number',
  'step-number',
  'type-name',
  'extra-key',
  'synthetic',
  'declare-effect',
  'compaction',
  // Only a recording carries these (a runner's append has no seq, createdAt or inherited flag).
  'seq',
  'created-at',
  'fork-claim',
] as const;
type Kind = (typeof KINDS)[number];
const RECORDING_ONLY = new Set<Kind>(['seq', 'created-at', 'fork-claim']);

export interface Mutation {
  kind: Kind;
  a: number;
  b: number;
  c: number;
}

export interface Plan {
  base: number;
  mutations: Mutation[];
  /** Where a runner cuts its runs into appends. */
  cuts: number[];
}

const mutationArb: fc.Arbitrary<Mutation> = fc.record({ kind: fc.constantFrom(...KINDS), a: fc.nat(), b: fc.nat(), c: fc.nat() });
export const planArb = (bases: number): fc.Arbitrary<Plan> =>
  fc.record({
    base: fc.nat({ max: bases - 1 }),
    mutations: fc.array(mutationArb, { minLength: 1, maxLength: 3 }),
    cuts: fc.array(fc.integer({ min: 1, max: 6 }), { minLength: 1, maxLength: 8 }),
  });

const NUMBERS = [-1, 0, 1.5, 2 ** 31 - 1, 2 ** 31, -(2 ** 31), 2 ** 53 - 1, 2 ** 53, 1e308, -1e308];
const FORGED_IDS = ['forged', '', 'x'.repeat(201), 'c\u0000', '\ud800', ' ', 'CALL_1_1_1', 'call_1_1_1'];
const EXTRA_KEYS = ['extra', '__proto__', 'constructor', 'seq', 'synthetic', 'toString', 'Turn', 'k\u0000', '\udc00', ''];
const TIMES = [
  '1970-01-01T00:00:00Z',
  '0001-01-01T00:00:00Z',
  '0000-01-01T00:00:00Z',
  '9999-12-31T23:59:59.999Z',
  '2026-01-01T00:00:00+15:59',
  '2026-01-01T00:00:00-23:59',
  '2026-02-30T00:00:00Z',
  '2026-06-01T12:00:00.123456789Z',
];
const typeVariants = (t: string) => [
  t.toUpperCase(),
  t[0].toUpperCase() + t.slice(1),
  `${t} `,
  ` ${t}`,
  t.replace('/', '\u2215'),
  t.replace('/', '\uff0f'),
  `${t}\u200b`,
  t.replace(/[a-z]/, (ch) => String.fromCharCode(ch.charCodeAt(0) + 0xfee0)),
  t.replace('i', '\u0131'),
  `plugin/${t}`,
  t.replace('/', '//'),
];

const obj = (v: unknown): Record<string, unknown> | undefined =>
  typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined;
const clone = <T>(v: T): T => structuredClone(v);
const at = <T>(xs: readonly T[], n: number): T | undefined => (xs.length ? xs[n % xs.length] : undefined);

/** The ids a log names: calls, inputs, results. */
function idsOf(events: readonly HostileEvent[]): string[] {
  const ids: string[] = [];
  for (const e of events) {
    const d = obj(e.data);
    if (!d) continue;
    for (const k of ['callId', 'inputId', 'resultId']) if (typeof d[k] === 'string') ids.push(d[k] as string);
    if (Array.isArray(d.toolCalls)) for (const c of d.toolCalls) if (typeof obj(c)?.id === 'string') ids.push(obj(c)!.id as string);
  }
  return ids;
}

/** Applies `plan` to one of `bases` (logs forkline's agent wrote); seqs are renumbered after each mutation unless one sets them itself. */
export function mutate(bases: readonly HostileEvent[][], plan: Plan): HostileLog {
  const base = bases[plan.base % bases.length];
  let events = clone(base);
  const done: string[] = [];
  let recordingOnly = events.some((e) => e.inherited || e.type === 'session/end-seed');
  let seqsSet = false;
  for (const m of plan.mutations) {
    const n = events.length;
    const i = m.a % Math.max(n, 1);
    const j = m.b % Math.max(n, 1);
    const e = events[i];
    switch (m.kind) {
      case 'swap':
        if (n < 2) break;
        [events[i], events[j]] = [events[j], events[i]];
        done.push(`swap ${i} ${j}`);
        break;
      case 'move': {
        if (!e) break;
        const [moved] = events.splice(i, 1);
        events.splice(j, 0, moved);
        done.push(`move ${i} -> ${j}`);
        break;
      }
      case 'duplicate':
        if (!e) break;
        events.splice(j, 0, clone(e));
        done.push(`duplicate ${i} at ${j}`);
        break;
      case 'drop':
        events.splice(i, 1);
        done.push(`drop ${i} (${e?.type})`);
        break;
      case 'forge-id': {
        const d = obj(e?.data);
        if (!d) break;
        const pool = [...FORGED_IDS, ...idsOf(events), ...bases.flatMap(idsOf)];
        const value = at(pool, m.b)!;
        const field = at(
          ['callId', 'inputId', 'resultId', 'toolCalls'].filter((k) => k in d),
          m.c,
        );
        if (!field) break;
        if (field === 'toolCalls') {
          const call = obj(at(d.toolCalls as unknown[], m.c));
          if (!call) break;
          call.id = value;
        } else d[field] = value;
        done.push(`forge ${field} of ${i} (${e.type}) = ${JSON.stringify(value).slice(0, 40)}`);
        break;
      }
      case 'cross-turn-result': {
        // A result moved to another step's place, still naming its own call (or its call moved to another turn's result).
        const results = events.flatMap((x, k) => (x.type === 'tool/result' ? [k] : []));
        const messages = events.flatMap((x, k) => (x.type === 'model/message' ? [k] : []));
        const r = at(results, m.a);
        const target = at(messages, m.b);
        if (r === undefined || target === undefined) break;
        const moved = clone(events[r]);
        const md = obj(events[target].data)!;
        Object.assign(obj(moved.data)!, { turn: md.turn, step: md.step });
        events.splice(target + 1, 0, moved);
        done.push(`result ${r} (call ${String(obj(moved.data)!.callId)}) answered in turn ${String(md.turn)} step ${String(md.step)}`);
        break;
      }
      case 'cross-session': {
        const other = bases[m.c % bases.length];
        const foreign = other.filter(
          (x) => x.type === 'tool/result' || x.type === 'tool/approval' || x.type === 'tool/approval-request' || x.type === 'turn/end',
        );
        const f = at(foreign, m.a);
        if (!f) break;
        events.splice(j, 0, clone({ ...f, inherited: undefined }));
        done.push(`another session's ${f.type} at ${j}`);
        break;
      }
      case 'approved-start':
      case 'undecided-start': {
        // plugin/agent/approved-call-start for a call: for `undecided-start`, its decision (and request) dropped first.
        const messages = events.flatMap((x, k) => (x.type === 'model/message' && (obj(x.data)?.toolCalls as unknown[])?.length ? [k] : []));
        const k = at(messages, m.a);
        if (k === undefined) break;
        const d = obj(events[k].data)!;
        const call = obj(at(d.toolCalls as unknown[], m.c))!;
        if (m.kind === 'undecided-start')
          events = events.filter((x) => !((x.type === 'tool/approval' || x.type === 'tool/approval-request') && obj(x.data)?.callId === call.id));
        events.splice(k + 1, 0, { seq: 0, type: 'plugin/agent/approved-call-start', data: { turn: d.turn, step: d.step, callId: call.id } });
        done.push(`${m.kind} of call ${String(call.id)}`);
        break;
      }
      case 'turn-end-twice': {
        const ends = events.flatMap((x, k) => (x.type === 'turn/end' ? [k] : []));
        const k = at(ends, m.a);
        if (k === undefined) break;
        events.splice(k + 1 + (m.b % 3), 0, clone(events[k]));
        done.push(`turn/end ${k} twice`);
        break;
      }
      case 'number': {
        const d = obj(e?.data);
        if (!d) break;
        const nums = Object.keys(d).filter((k) => typeof d[k] === 'number');
        const usage = obj(d.usage);
        const key = at(nums, m.c);
        const value = at(NUMBERS, m.b)!;
        if (key) d[key] = value;
        else if (usage) usage.inputTokens = value;
        else break;
        done.push(`${i} (${e.type}).${key ?? 'usage.inputTokens'} = ${value}`);
        break;
      }
      case 'step-number': {
        // One step renumbered in every event that names it (its start, message, results, approvals, end): the numbers agree, but are huge or odd.
        const starts = events.filter((x) => x.type === 'step/start');
        const target = obj(at(starts, m.a)?.data);
        if (!target) break;
        const value = at(NUMBERS, m.b)!;
        const { turn, step } = target;
        for (const x of events) {
          const d = obj(x.data);
          if (d && d.turn === turn && d.step === step) d.step = value;
        }
        done.push(`step ${String(step)} of turn ${String(turn)} renumbered ${value}`);
        break;
      }
      case 'type-name': {
        if (!e) break;
        const t = at(typeVariants(e.type), m.b)!;
        done.push(`type of ${i}: ${JSON.stringify(e.type)} -> ${JSON.stringify(t)}`);
        e.type = t;
        break;
      }
      case 'extra-key': {
        const d = obj(e?.data);
        if (!d) break;
        const key = at(EXTRA_KEYS, m.b)!;
        Object.defineProperty(d, key, { value: m.c % 2 ? 1 : 'x', enumerable: true, writable: true, configurable: true });
        done.push(`key ${key} in ${i} (${e.type})`);
        break;
      }
      case 'synthetic':
        if (!e) break;
        e.synthetic = !e.synthetic;
        done.push(`synthetic ${e.synthetic} on ${i} (${e.type})`);
        break;
      case 'declare-effect': {
        // A declared effect other than the one a call carries (a read-only label on a call that has side effects, or the reverse).
        const messages = events.flatMap((x, k) => (x.type === 'model/message' && (obj(x.data)?.toolCalls as unknown[])?.length ? [k] : []));
        const k = at(messages, m.a);
        if (k === undefined) break;
        const call = obj(at(obj(events[k].data)!.toolCalls as unknown[], m.c))!;
        const effect = at(
          ['read-only', 'idempotent', 'side-effects'].filter((x) => x !== call.effect),
          m.b,
        )!;
        events.splice(m.b % (k + 1), 0, { seq: 0, type: 'session/runner-tools', data: { tools: [{ name: call.name, effect }] } });
        done.push(`runner declares ${String(call.name)} ${effect} before its call at ${k}`);
        break;
      }
      case 'compaction': {
        // A compaction's replacement of a range that may cut a turn, a step or a call from its result, bracketed or not.
        const k = j;
        const fromSeq = m.a % (k + 1);
        const toSeq = at([k - 1, fromSeq, fromSeq + 1, k, 2 ** 31], m.c)!;
        const range = { fromSeq, toSeq };
        const replace = { seq: 0, type: 'surface/replace', data: { ...range, content: 'summary' } };
        const bracket = m.b % 3;
        const inserted =
          bracket === 0
            ? [replace]
            : [
                { seq: 0, type: 'plugin/compaction/start', data: { reason: 'manual', ...range } },
                replace,
                ...(bracket === 1 ? [{ seq: 0, type: 'plugin/compaction/end', data: { ...range, summarySeq: k + 1 } }] : []),
              ];
        events.splice(k, 0, ...inserted);
        done.push(`compaction ${fromSeq}..${toSeq} at ${k}${bracket === 0 ? ' (no bracket)' : bracket === 2 ? ' (never ended)' : ''}`);
        break;
      }
      case 'seq': {
        if (!e) break;
        renumber(events);
        seqsSet = true;
        e.seq = at([...NUMBERS.filter(Number.isInteger), i - 1, i + 1, j], m.b)!;
        done.push(`seq of ${i} = ${e.seq}`);
        break;
      }
      case 'created-at': {
        if (!e) break;
        e.createdAt = at(TIMES, m.b)!;
        done.push(`createdAt of ${i} = ${e.createdAt}`);
        break;
      }
      case 'fork-claim': {
        // The first k events claimed as a parent's (inherited), with a marker that may not fit them, or a later event claiming to be inherited.
        const k = m.a % (n + 1);
        const variant = m.c % 4;
        if (variant === 3) {
          if (!e) break;
          e.inherited = true;
          done.push(`${i} (${e.type}) claims to be inherited`);
          break;
        }
        events.forEach((x, q) => (x.inherited = q < k || undefined));
        const marker = { parentSessionId: 'ses_parent', cutSeq: variant === 1 ? k : k - 1, inheritedEventCount: variant === 2 ? k + 1 : k };
        events.splice(k, 0, { seq: 0, type: 'session/end-seed', data: marker });
        done.push(`first ${k} inherited, marker ${JSON.stringify(marker)}`);
        break;
      }
    }
    if (RECORDING_ONLY.has(m.kind)) recordingOnly = true;
    if (!seqsSet) renumber(events);
  }
  return { events, mutations: done, recordingOnly };
}

function renumber(events: HostileEvent[]) {
  events.forEach((e, k) => (e.seq = k));
}

/** The words only a repair writes (docs/contract.md#repair), or cancelTurn's closers: the service's, never a runner's (runner-protocol.ts). */
function repairWords(e: HostileEvent): boolean {
  const d = obj(e.data);
  if (e.type === 'tool/result') return d?.status === 'interrupted' || d?.status === 'not-started';
  if (e.type === 'step/end' || e.type === 'turn/end') return d?.reason === 'interrupted' || d?.reason === 'forked';
  return false;
}

/**
 * Who writes an event when a runner runs the session: the service (inputs, a
 * person's decision, repair's and a cancel's closers: sendMessage,
 * approveToolCall, recovery, cancelTurn) or the runner (appendEvents). Which
 * door may write what is the runner protocol's; what a log may hold is the
 * same whoever writes it.
 */
export const writtenByService = (e: HostileEvent): boolean =>
  e.type === 'inbox/add' || e.type === 'tool/approval' || e.type === 'session/end-seed' || e.synthetic === true || repairWords(e);
