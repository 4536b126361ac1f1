// The log contract rows (tests/spec/log-spec.ts) against the pure core, as the
// store and the GraphQL API run them: a log is an array of events, each batch
// decoded by the event codecs (core/events.ts) and checked by the one reducer
// (core/log-state.ts) before any of it is kept; a fork is its parent's events
// through the cut, inherited, then its seed (core/fork-seed.ts).
import { buildForkSeed } from '../../src/core/fork-seed.ts';
import { decodeEvent } from '../../src/core/events.ts';
import { ForklineError } from '../../src/core/errors.ts';
import { LogState } from '../../src/core/log-state.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';
import { logSpec, type LogSpecEvent, type Refusal } from '../spec/log-spec.ts';
import { openAtCut } from '../spec/reference-log.ts';

interface Log {
  events: LogSpecEvent[];
  parentId?: string;
}

const logs = new Map<string, Log>();
let created = 0;

const refusal = (err: unknown): Refusal => {
  if (!(err instanceof ForklineError)) throw err;
  return { code: err.code };
};

/** The session's descendants, children before their own children. */
const descendantsOf = (id: string): string[] => [...logs].filter(([, l]) => l.parentId === id).flatMap(([child]) => [child, ...descendantsOf(child)]);

logSpec('pure core', {
  async createSession() {
    const id = `ses_${++created}`;
    logs.set(id, { events: [] });
    return id;
  },
  async append(id, batch, opts) {
    const log = logs.get(id);
    if (!log) return { code: 'SESSION_NOT_FOUND' };
    if (opts?.expectedEventCount !== undefined && opts.expectedEventCount !== log.events.length) return { code: 'SESSION_BUSY' };
    const state = new LogState().applyAll(log.events);
    const kept: LogSpecEvent[] = [];
    for (const e of batch) {
      let data: unknown;
      try {
        data = decodeEvent(e.type, e.data);
      } catch (err) {
        return refusal(err);
      }
      const event = { seq: log.events.length + kept.length, type: e.type, data, ...(e.synthetic ? { synthetic: true } : {}) };
      const broken = state.violation(event);
      if (broken) return { code: 'BAD_USER_INPUT', rule: broken.rule, seq: event.seq };
      state.apply(event);
      kept.push(event);
    }
    log.events.push(...kept);
    return undefined;
  },
  async page(id, afterSeq, first) {
    return (logs.get(id)?.events ?? []).slice(afterSeq + 1, afterSeq + 1 + first);
  },
  async counters(id) {
    const log = logs.get(id);
    if (!log) return null;
    const state = new LogState().applyAll(log.events);
    return {
      eventCount: state.nextSeq,
      turnCount: state.turnCount,
      pendingInputCount: state.pendingInputCount,
      status: state.openTurn === undefined ? 'IDLE' : 'RUNNING',
    };
  },
  async fork(parentId, atSeq) {
    const parent = logs.get(parentId)!;
    const seed = buildForkSeed({ parentSessionId: parentId, cutSeq: atSeq, openTail: openAtCut(parent.events, atSeq), effectOf: toolEffectOf });
    const id = `ses_${++created}`;
    logs.set(id, { parentId, events: [...parent.events.slice(0, atSeq + 1).map((e) => ({ ...e, inherited: true })), ...seed.events] });
    return id;
  },
  async deleteSession(id, withDescendants) {
    if (!logs.has(id)) return { code: 'SESSION_NOT_FOUND' };
    const descendants = descendantsOf(id);
    if (descendants.length && !withDescendants) return { code: 'SESSION_HAS_CHILDREN' };
    for (const gone of [id, ...descendants]) logs.delete(gone);
    return [id, ...descendants];
  },
});
