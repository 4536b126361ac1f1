// A model's tool calls inside one run of an agent framework's own loop
// (docs/runners.md#call-ids). The framework hands each answer's calls back to
// the model in its next request, under the ids the model gave them, and runs
// them by those ids; the log holds them under the ids forkline's own agent
// would record (docs/agents.md: a call whose id the log cannot hold, or that
// another call of its answer took, is recorded under `call_<position>` and
// never runs; one repeating an id the conversation already holds runs under
// a fresh one). The framework is handed each call under its wire id (the form
// every provider takes, as forkline sends it: docs/agents.md#wire-names),
// never one the run's conversation holds already, and a call it names by
// that id is read back to the id the log holds.
import { createHash } from 'node:crypto';
import type { ChatMessage, RunnerToolCall } from './runner.ts';
import { storableText } from './tool-output.ts';

/** A call id every provider takes (forkline's rule, docs/agents.md#wire-names): at most 40 of `[a-zA-Z0-9_-]`. */
const WIRE_ID = /^[a-zA-Z0-9_-]{1,40}$/;
const WIRE_ID_MAX = 40;
/** The longest id or tool name the log holds (docs/agents.md), in code points: its schema counts a surrogate pair as one. */
const MAX_ID = 200;
/** Whether the log takes a text's length (1-MAX_ID code points; each lone surrogate counts one, as the log's schema counts). */
const fits = (s: string) => s.length >= 1 && (s.length <= MAX_ID || [...s].length <= MAX_ID);

/** 16 characters of a SHA-256 of `text` in wire characters: the digest forkline's forms carry (docs/agents.md#wire-names). */
const digest = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, 16);

/**
 * The id a call's result is recorded under: `res_<session>_<call>`, or, when that is longer than an id may be (a call
 * id may itself be 200 characters), `res_<session>_` and a digest of the call id: a result the log refused would
 * leave its call unanswered and the turn failed.
 */
export function resultIdOf(sessionId: string, callId: string): string {
  const id = `res_${sessionId}_${callId}`;
  return fits(id) ? id : `res_${sessionId}_${digest(callId)}`;
}

/** The id forkline sends a call under: its own when providers take it, else its wire characters (cut) with a digest of the whole. */
export const wireCallId = (id: string): string => (WIRE_ID.test(id) ? id : `${id.slice(0, WIRE_ID_MAX - 17).replace(/[^a-zA-Z0-9_-]/g, '_')}_${digest(id)}`);

/** `base` (a wire id) with `suffix` after it, cut so that the whole is still a wire id. */
function wireCallIdWith(base: string, suffix: string): string {
  const tail = suffix.length > WIRE_ID_MAX / 2 ? `_${digest(suffix)}` : suffix;
  return `${base.slice(0, WIRE_ID_MAX - tail.length)}${tail}`;
}

/** Text the log holds as it is: no NUL, no unpaired surrogate. */
const storable = (s: string) => !s.includes('\u0000') && s.isWellFormed();

/** A call as recorded, with the id the framework is handed for it. */
export interface AdmittedCall extends RunnerToolCall {
  /** The id the framework runs it by and sends it back to the model under: a wire id no other call of the run's conversation holds. */
  sentId: string;
  /** Why it does not run (its `error` result, written with the answer); undefined: it runs. */
  refused?: string;
}

export class RunCallIds {
  /** The ids the run's conversation holds: the history's (already in their wire form) and each call handed on since. */
  private readonly sent = new Set<string>();
  /** The id each call handed on is recorded under, by the id it was handed on under. */
  private readonly recordedIds = new Map<string, string>();

  constructor(history: readonly ChatMessage[]) {
    for (const m of history) if (m.role === 'assistant') for (const c of m.tool_calls ?? []) this.sent.add(c.id);
  }

  /** One answer's calls (of `turn`'s `step`) as the log records them, each with the id the framework is handed. */
  admit(calls: readonly RunnerToolCall[], turn: number, step: number): AdmittedCall[] {
    const ids = new Set<string>();
    const given = new Set(calls.map((c) => c.id));
    const freshId = (i: number) => {
      let id = `call_${i + 1}`;
      while (given.has(id) || ids.has(id) || this.sent.has(id)) id = `${id}_`;
      return id;
    };
    return calls.map((call, i): AdmittedCall => {
      const why = !fits(call.id)
        ? `the model gave it an id of ${call.id.length} characters (1-${MAX_ID} allowed)`
        : !storable(call.id)
          ? 'the model gave it an id holding a NUL character or an unpaired surrogate'
          : ids.has(call.id)
            ? `the model gave it the id of another call of this step (${call.id})`
            : !fits(call.name)
              ? `the model named a tool of ${call.name.length} characters (1-${MAX_ID} allowed)`
              : !storable(call.name)
                ? 'the model named a tool with a NUL character or an unpaired surrogate'
                : undefined;
      const badId = why !== undefined && (!fits(call.id) || !storable(call.id) || ids.has(call.id));
      const id = badId || this.sent.has(call.id) ? freshId(i) : call.id;
      ids.add(id);
      // Cut at MAX_ID UTF-16 units it may split a pair: made storable after the cut.
      const name = fits(call.name) && storable(call.name) ? call.name : storableText(call.name.slice(0, MAX_ID)) || 'unnamed';
      const own = wireCallId(id);
      let sentId = own;
      for (let n = 1; this.sent.has(sentId); n++) sentId = wireCallIdWith(own, `_t${turn}s${step}${n > 1 ? `_${n}` : ''}`);
      this.sent.add(sentId);
      this.recordedIds.set(sentId, id);
      return { ...call, id, name, sentId, ...(why ? { refused: `not run: ${why}` } : {}) };
    });
  }

  /** The id the log holds for the call the framework names by `sentId`. */
  recorded(sentId: string): string {
    return this.recordedIds.get(sentId) ?? sentId;
  }
}
