// Properties of the pure core on any log it accepts (docs/contract.md#append-rules, docs/contract.md#repair,
// docs/contract.md#exact-fork, docs/contract.md#continuing-a-child), checked with fast-check on logs
// forkline's own agent loop writes (helpers/agent-logs.ts) and on those logs mutated as an attacker would
// (security/hostile-logs.ts):
// - every log the agent writes, and every prefix of one, passes the recording validator (the one reducer);
// - a log the validator accepts is one the agent could have written: results after their calls in their
//   step, call ids once per step, steps and turns closed once, no turn ended over an open step, no step
//   ended `completed` or `failed` with a call unanswered;
// - repair of any prefix, for every cause, gives closers the rules accept, leaves nothing open (but a crash
//   keeps a pending approval waiting), and is idempotent; a fork's seed holds exactly the `forked` closers,
//   and crash recovery's close the same calls, step and turn;
// - the model request of a fork cut at any seq and sent a message equals the parent's prefix with those
//   closers and the same message.
// Seeded (LOG_PROPERTIES_SEED replays another; fast-check prints the seed and path of a failure).
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { ForklineError } from '../../src/core/errors.ts';
import type { LogEvent } from '../../src/core/events.ts';
import { buildForkSeed } from '../../src/core/fork-seed.ts';
import { foldLog } from '../../src/core/log-state.ts';
import { Conversation } from '../../src/core/model-request.ts';
import { RecordingValidator } from '../../src/core/recording.ts';
import { closeOpenTail, type RepairCause } from '../../src/core/repair.ts';
import { CompactionBracket } from '../../src/agent/compaction.ts';
import { agentLogArb, agentToolEffect, agentWritableProblems, type AgentEvent } from '../helpers/agent-logs.ts';
import { mutate, planArb, type HostileEvent } from '../security/hostile-logs.ts';

const SEED = Number(process.env.LOG_PROPERTIES_SEED ?? 20261206);
const runs = (n: number) => ({ seed: SEED, numRuns: n });

/** The recording validator's verdict on a log (header V4, no runner): undefined, or the error naming its line and rule. */
function refusal(events: readonly HostileEvent[]): string | undefined {
  const v = new RecordingValidator();
  try {
    v.push(JSON.stringify({ format: 'forkline.recording', version: 4, session: { id: 'ses_prop', title: null } }));
    for (const e of events) v.push(JSON.stringify(e));
    v.finish();
    return undefined;
  } catch (err) {
    if (err instanceof ForklineError) return err.message;
    throw err;
  }
}

/** The closers the rules accept after `prefix`, or the rule they break. */
function closersProblem(prefix: readonly LogEvent[], closers: ReturnType<typeof closeOpenTail>): string | undefined {
  const state = foldLog(prefix);
  for (const c of closers) {
    const e = { ...c, seq: state.nextSeq };
    const broken = state.violation(e);
    if (broken) return `${broken.rule}: ${broken.detail}`;
    state.apply(e);
  }
  return undefined;
}

/** The messages the agent sends for a log (session-fold.ts: the compaction bracket, then the conversation). */
function modelMessages(events: readonly LogEvent[]) {
  const bracket = new CompactionBracket();
  const conversation = new Conversation();
  for (const e of events) for (const c of bracket.filter(e)) conversation.apply(c);
  return conversation.messages();
}

/**
 * The first `end` events of a log, as a log of their own: a fork's child cut inside its inherited prefix is
 * its parent's log there (the generator forks once, so the parent's events are its own).
 */
function prefixOf(log: readonly AgentEvent[], end: number): AgentEvent[] {
  const prefix = log.slice(0, end);
  return prefix.at(-1)?.inherited ? prefix.map(({ inherited: _inherited, ...e }) => e) : prefix;
}

const causes = (prefix: readonly LogEvent[]): RepairCause[] => [
  { kind: 'interrupted', sessionId: 'ses_p' },
  { kind: 'failed', sessionId: 'ses_p', message: 'bug' },
  { kind: 'forked', parentSessionId: 'ses_p', cutSeq: prefix.length - 1 },
];

describe(`the pure core on any log it accepts (LOG_PROPERTIES_SEED=${SEED})`, () => {
  it('every log the agent writes, and each of its prefixes, passes the rules', () => {
    fc.assert(
      fc.property(agentLogArb, (log) => {
        expect(agentWritableProblems(log)).toEqual([]);
        for (let end = 0; end <= log.length; end++) expect(refusal(prefixOf(log, end))).toBeUndefined();
      }),
      runs(300),
    );
  });

  it('a log the rules accept, however it was mutated, is one the agent could have written', () => {
    const bases = fc.sample(agentLogArb, { seed: SEED, numRuns: 40 });
    let accepted = 0;
    fc.assert(
      fc.property(planArb(bases.length), (plan) => {
        const log = mutate(bases, plan);
        if (refusal(log.events) !== undefined) return;
        accepted++;
        expect(agentWritableProblems(log.events), log.mutations.join('; ')).toEqual([]);
      }),
      runs(3000),
    );
    // The mutations do get through the rules sometimes (plugin events, settings, reorderings that keep them).
    expect(accepted).toBeGreaterThan(100);
  });

  it('repair of any prefix, for every cause, is accepted, closes what is open, and is idempotent; fork and crash close the same', () => {
    fc.assert(
      fc.property(agentLogArb, (log) => {
        for (let end = 0; end <= log.length; end++) {
          const prefix = prefixOf(log, end);
          const open = foldLog(prefix).openTail();
          const byCause = new Map<string, ReturnType<typeof closeOpenTail>>();
          for (const cause of causes(prefix)) {
            const closers = closeOpenTail(prefix, cause, agentToolEffect);
            byCause.set(cause.kind, closers);
            expect(closersProblem(prefix, closers), `${cause.kind} after seq ${end - 1}`).toBeUndefined();
            const repaired: AgentEvent[] = [...prefix, ...closers.map((c, i) => ({ ...c, seq: end + i }))];
            // Nothing open after it, but a turn a crash leaves waiting for a decision.
            const after = foldLog(repaired);
            if (after.openTurn !== undefined) {
              expect(cause.kind).toBe('interrupted');
              expect(after.waiting).toBe(true);
            }
            expect(closeOpenTail(repaired, cause, agentToolEffect), `repair twice (${cause.kind}) after seq ${end - 1}`).toEqual([]);
            expect(agentWritableProblems(repaired)).toEqual([]);
            expect(refusal(repaired)).toBeUndefined();
          }
          // A fork's seed: its marker, then the `forked` closers (the one repair function).
          const seed = buildForkSeed({ parentSessionId: 'ses_p', cutSeq: end - 1, openTail: open, effectOf: agentToolEffect });
          expect(seed.events.slice(1).map(({ seq: _seq, ...e }) => e)).toEqual(byCause.get('forked'));
          // Crash recovery closes the same calls, step and turn, unless the crash keeps a decision pending.
          if (!foldLog(prefix).waiting) {
            const shape = (cs: ReturnType<typeof closeOpenTail>) =>
              cs.map((c) => {
                const d = c.data as Record<string, unknown>;
                return [c.type, d.turn, d.step, d.callId];
              });
            expect(shape(byCause.get('interrupted')!)).toEqual(shape(byCause.get('forked')!));
          }
        }
      }),
      runs(80),
    );
  });

  it("a fork cut at any seq, sent a message, asks the model what the parent's prefix and its closers ask", () => {
    fc.assert(
      fc.property(agentLogArb, fc.nat(), (log, where) => {
        const cutSeq = where % log.length;
        const prefix = prefixOf(log, cutSeq + 1);
        const seed = buildForkSeed({ parentSessionId: 'ses_p', cutSeq, openTail: foldLog(prefix).openTail(), effectOf: agentToolEffect });
        // The child's own agent takes the oldest pending input (an inherited one first), as a new turn.
        const message = { type: 'inbox/add', data: { inputId: 'in_new', text: 'and now?' } };
        const taking = (events: readonly LogEvent[]) => {
          const state = foldLog(events);
          const inputId = state.pendingInputs[0]?.inputId ?? 'in_new';
          return [
            { type: 'inbox/remove', data: { inputId, reason: 'taken' } },
            { type: 'turn/start', data: { turn: state.lastTurn + 1, inputId } },
          ];
        };
        const withSeqs = (events: ReadonlyArray<Omit<LogEvent, 'seq'>>, from: number) => events.map((e, i) => ({ ...e, seq: from + i }));
        const child: LogEvent[] = [...prefix.map((e) => ({ ...e, inherited: true })), ...seed.events];
        child.push(...withSeqs([message], child.length));
        child.push(...withSeqs(taking(child), child.length));
        const parent: LogEvent[] = [...prefix, ...withSeqs(closeOpenTail(prefix, causes(prefix)[2], agentToolEffect), prefix.length)];
        parent.push(...withSeqs([message], parent.length));
        parent.push(...withSeqs(taking(parent), parent.length));
        expect(refusal(child)).toBeUndefined();
        expect(modelMessages(child)).toEqual(modelMessages(parent));
      }),
      runs(300),
    );
  });
});
