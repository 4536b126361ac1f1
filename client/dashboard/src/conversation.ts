// Folds a session's raw event log into what a reader follows: user inputs,
// assistant text, tool calls with their results, fork markers and turn ends.
// Pure (no DOM), so the compare view can fold parent and child the same way.
// Built on the server's own reducer (src/core/log-state.ts, pure): it says
// which calls are still running and which events break the log's rules.
import type { EventFieldsFragment } from '../../generated/graphql.ts';
import type { LogEvent as CoreEvent } from '../../../src/core/events.ts';
import { asCoreEvent, otherThanCore } from '../../../src/core/core-event.ts';
import { LogState } from '../../../src/core/log-state.ts';
import { FILES_CHANGE } from '../../../src/core/event-types.ts';
import { eventLabel } from './event-labels.ts';
import { visibleText } from '../../../src/core/visible-text.ts';
import { TakenInputs, type TakenInput } from '../../../src/core/taken-inputs.ts';

export type LogEvent = EventFieldsFragment;

export interface ToolCallView {
  id: string;
  name: string;
  arguments: string;
  /** The MCP server it went to (the `<server>__` of its name); unset: a built-in. */
  server?: string;
  /** The effect recorded with the call (`read-only`, `idempotent`, `side-effects`); unset in logs from before V4. */
  effect?: string;
  /**
   * Without a result: `running` while its step is open, `unanswered` when its
   * step closed without one, `not-loaded` when the fold stops before the log's end.
   */
  waiting?: 'running' | 'unanswered' | 'not-loaded';
  result?: {
    seq: number;
    status: string;
    content: string;
    synthetic: boolean;
    inherited: boolean;
    /** Written after a fork marker (a fork's closer): shown below the marker, not in the call. */
    afterMarker?: boolean;
    /**
     * How long the call ran: from its start to its result being stored. A step's
     * calls run one after another (session-runner.ts), so a call starts when its
     * model/message is stored, or when the previous call's result is. Unset for
     * synthetic results (repair wrote them).
     */
    durationMs?: number;
  };
  /**
   * Its approval (docs/contract.md#tool-approval): `pending` from its
   * tool/approval-request until its tool/approval gives the decision.
   */
  approval?: { state: 'pending'; seq: number } | { state: 'approved' | 'denied'; seq: number; reason: string; by: string };
  /** The files it changed (its `plugin/files/change` change set, stored right before its result). */
  files?: { seq: number; changes: Array<{ path: string; deleted: boolean }> };
}

interface ItemBase {
  /** Every seq that contributed to this item (the compare view filters on them). */
  seqs: number[];
  inherited: boolean;
}

export type ConversationItem =
  | (ItemBase & { kind: 'user'; inputId: string; text: string; state: 'queued' | 'taken' | 'cancelled' })
  | (ItemBase & { kind: 'assistant'; turn: number; step: number; text: string; toolCalls: ToolCallView[] })
  | (ItemBase & {
      kind: 'turn-end';
      turn: number;
      reason: string;
      synthetic: boolean;
      endSeq: number;
      /** A failed turn's input, when in the window: Retry re-runs it (editMessage with the same text). */
      retry?: { seq: number; inputId: string; text: string };
    })
  | (ItemBase & { kind: 'step-end'; turn: number; step: number; reason: string; synthetic: boolean })
  | (ItemBase & {
      kind: 'fork-marker';
      parentSessionId: string;
      cutSeq: number;
      inheritedEventCount: number;
      /**
       * Inputs the prefix took (inbox/remove "taken") whose turn had not started at the cut: nothing
       * was open, so repair closed nothing and nothing will answer them (docs/contract.md §2, rule 6).
       */
      takenUnstarted?: TakenInput[];
    })
  /** A fork's closer for a call made before its marker, shown after the marker (the order of the log). */
  | (ItemBase & { kind: 'closer-result'; call: ToolCallView })
  /** The agent's own error report (plugin/agent/error): why a turn failed. */
  | (ItemBase & { kind: 'agent-error'; turn: number; step: number; message: string })
  /** A compaction's summary (surface/replace): the model sees it instead of events fromSeq..toSeq. */
  | (ItemBase & { kind: 'compaction'; fromSeq: number; toSeq: number; summary: string })
  /** `type`: a plugin event's raw type, shown on hover (its text is the timeline's label for it). */
  | (ItemBase & { kind: 'note'; text: string; type?: string });

export interface FoldOptions {
  /**
   * The events are a window of the log, not its start: the fold begins at the
   * window's first turn/start (or, inside a turn, at its first turn event),
   * and removals of inputs added before the window are not rule breaks.
   */
  partial?: boolean;
  /** The window stops before the log's end: open calls are `not-loaded`, not `running`. */
  endsBeforeLog?: boolean;
}

const str = (v: unknown) => (typeof v === 'string' ? v : v == null ? '' : JSON.stringify(v));
const num = (v: unknown) => (typeof v === 'number' ? v : Number(v));

/** Reasons that end a step or turn abnormally; normal ones are not shown. */
const NOTABLE_STEP_REASONS = new Set(['failed', 'interrupted', 'forked']);

export function foldConversation(events: readonly LogEvent[], opts: FoldOptions = {}): ConversationItem[] {
  const items: ConversationItem[] = [];
  const users = new Map<string, Extract<ConversationItem, { kind: 'user' }>>();
  const calls = new Map<string, { item: Extract<ConversationItem, { kind: 'assistant' }>; call: ToolCallView }>();
  /** Per model/message (its first seq): when its next call started (the message, then each result, stored). */
  const callStarts = new Map<number, string>();
  let markerSeq = -1;
  /** The input each turn took (turn/start), for a failed turn's Retry. */
  const turnInputs = new Map<number, string>();
  const taken = new TakenInputs();

  const state = new LogState();
  // A window starts with no turn history: the reducer is put in step with the
  // first turn event it sees, so the rules it checks hold from there on.
  let inStep = !opts.partial;

  for (const e of events) {
    const d = (e.data ?? {}) as Record<string, unknown>;
    const base = { seqs: [e.seq], inherited: e.inherited };
    taken.see(e);
    const core = { seq: e.seq, type: e.type, data: e.data, synthetic: e.synthetic } as CoreEvent & { synthetic: boolean };
    if (!inStep && typeof d.turn === 'number') {
      inStep = true;
      state.lastTurn = d.turn - 1;
      if (e.type !== 'turn/start') syncMidTurn(state, e.seq, d.turn, e.type, d.step);
    }
    let broken = state.violation(core);
    // Its inbox/add lies before the window.
    if (broken?.rule === 'inbox' && opts.partial && e.type === 'inbox/remove' && !users.has(str(d.inputId))) broken = undefined;
    // Its call lies before the window (a window that starts inside a step).
    if (broken?.rule === 'result pairing' && opts.partial && !calls.has(str(d.callId)) && state.openStep?.calls.length === 0) {
      state.apply(core);
      items.push({ ...base, kind: 'note', text: `result of ${str(d.callId)} (${str(d.status)}); its call is before the loaded events` });
      continue;
    }
    state.apply(core);
    if (broken) {
      // The store refuses such events; a log that has one anyway shows it.
      items.push({ ...base, kind: 'note', text: `${e.type} breaks the log's rules (${broken.rule}): ${broken.detail}` });
      continue;
    }
    if (e.type.startsWith('plugin/')) {
      const changed = e.type === FILES_CHANGE ? calls.get(str(d.callId)) : undefined;
      if (changed) {
        changed.call.files = { seq: e.seq, changes: fileChangesOf(d) };
        changed.item.seqs.push(e.seq);
      } else if (e.type === 'plugin/agent/error') items.push({ ...base, kind: 'agent-error', turn: num(d.turn), step: num(d.step), message: str(d.message) });
      else items.push({ ...base, kind: 'note', text: eventLabel(e.type), type: e.type });
      continue;
    }
    // The payload is read defensively (str, num): a dashboard shows whatever a log holds.
    const ev = asCoreEvent(core);
    switch (ev.type) {
      case 'inbox/add': {
        const item = { ...base, kind: 'user' as const, inputId: str(d.inputId), text: str(d.text), state: 'queued' as const };
        users.set(item.inputId, item as Extract<ConversationItem, { kind: 'user' }>);
        items.push(item);
        break;
      }
      case 'inbox/remove': {
        const user = users.get(str(d.inputId));
        if (user) {
          user.state = d.reason === 'cancelled' ? 'cancelled' : 'taken';
          user.seqs.push(e.seq);
        }
        break;
      }
      case 'model/message': {
        const toolCalls = Array.isArray(d.toolCalls) ? (d.toolCalls as Array<Record<string, unknown>>) : [];
        const item: Extract<ConversationItem, { kind: 'assistant' }> = {
          ...base,
          kind: 'assistant',
          turn: num(d.turn),
          step: num(d.step),
          text: str(d.text),
          toolCalls: toolCalls.map((c) => {
            const call: ToolCallView = { id: str(c.id), name: str(c.name), arguments: str(c.arguments) };
            const server = serverOf(call.name);
            if (server) call.server = server;
            if (typeof c.effect === 'string') call.effect = c.effect;
            return call;
          }),
        };
        for (const call of item.toolCalls) calls.set(call.id, { item, call });
        callStarts.set(e.seq, e.createdAt);
        items.push(item);
        break;
      }
      case 'tool/result': {
        const owner = calls.get(str(d.callId))!; // the reducer checked it answers a call of the open step
        const afterMarker = markerSeq > owner.item.seqs[0];
        owner.call.result = { seq: e.seq, status: str(d.status), content: str(d.content), synthetic: e.synthetic, inherited: e.inherited, afterMarker };
        const started = callStarts.get(owner.item.seqs[0]);
        const durationMs = started ? Date.parse(e.createdAt) - Date.parse(started) : NaN;
        if (!e.synthetic && durationMs >= 0) owner.call.result.durationMs = durationMs;
        callStarts.set(owner.item.seqs[0], e.createdAt);
        if (afterMarker) items.push({ ...base, kind: 'closer-result', call: owner.call });
        else owner.item.seqs.push(e.seq);
        break;
      }
      case 'step/end':
        if (NOTABLE_STEP_REASONS.has(str(d.reason))) {
          items.push({ ...base, kind: 'step-end', turn: num(d.turn), step: num(d.step), reason: str(d.reason), synthetic: e.synthetic });
        }
        break;
      case 'turn/end': {
        const input = str(d.reason) === 'failed' ? users.get(turnInputs.get(num(d.turn)) ?? '') : undefined;
        const retry = input && { seq: input.seqs[0], inputId: input.inputId, text: input.text };
        items.push({ ...base, kind: 'turn-end', turn: num(d.turn), reason: str(d.reason), synthetic: e.synthetic, endSeq: e.seq, ...(retry ? { retry } : {}) });
        break;
      }
      case 'session/end-seed': {
        markerSeq = e.seq;
        const unstarted = taken.atMarker;
        items.push({
          ...base,
          kind: 'fork-marker',
          parentSessionId: str(d.parentSessionId),
          cutSeq: num(d.cutSeq),
          inheritedEventCount: num(d.inheritedEventCount),
          ...(unstarted.length ? { takenUnstarted: unstarted } : {}),
        });
        break;
      }
      case 'session/title':
        items.push({ ...base, kind: 'note', text: `title: ${visibleText(str(d.title))}` });
        break;
      case 'session/model':
        items.push({ ...base, kind: 'note', text: `model: ${str(d.provider)}/${str(d.model)}` });
        break;
      case 'session/tools':
        items.push({ ...base, kind: 'note', text: `tools: ${toolSetText(d.tools)}` });
        break;
      case 'session/instructions':
        items.push({ ...base, kind: 'note', text: str(d.text) ? `instructions: ${clip(str(d.text))}` : 'instructions cleared' });
        break;
      case 'session/runner-tools':
        items.push({ ...base, kind: 'note', text: `runner tools: ${runnerToolsText(d.tools)}` });
        break;
      case 'session/tool-approval':
        items.push({ ...base, kind: 'note', text: `tools needing approval: ${toolSetText(d.tools)}` });
        break;
      // Shown on the call they name (the reducer checked it is a call of the open step).
      case 'tool/approval-request':
      case 'tool/approval': {
        const owner = calls.get(str(d.callId));
        if (!owner) break;
        owner.call.approval =
          ev.type === 'tool/approval-request'
            ? { state: 'pending', seq: e.seq }
            : { state: d.decision === 'approved' ? 'approved' : 'denied', seq: e.seq, reason: str(d.reason), by: str(d.by) };
        owner.item.seqs.push(e.seq);
        break;
      }
      case 'surface/replace':
        items.push({ ...base, kind: 'compaction', fromSeq: num(d.fromSeq), toSeq: num(d.toSeq), summary: str(d.content) });
        break;
      // Shown by the user item they belong to and by the turn-end row.
      case 'turn/start':
        turnInputs.set(num(d.turn), str(d.inputId));
        break;
      case 'step/start':
        break;
      default:
        otherThanCore(ev);
    }
  }
  const open = new Set(state.openTail()?.step?.unanswered.map((c) => c.id));
  for (const { call } of calls.values()) {
    if (!call.result) call.waiting = !open.has(call.id) ? 'unanswered' : opts.endsBeforeLog ? 'not-loaded' : 'running';
  }
  return items;
}

/** What is said of an input a fork's cut leaves taken but unstarted (`where`: the session that holds it). */
export function takenUnstartedText(u: TakenInput, where = 'this session'): string {
  const which =
    u.seq >= 0 ? `Message #${u.seq}${u.text ? ` ("${clip(visibleText(u.text.replace(/\s+/g, ' ')), 80)}")` : ''}` : `Input ${visibleText(u.inputId)}`;
  return `${which} was taken but its turn had not started at the cut: nothing in ${where} will answer it. Send it again to answer it.`;
}

/** The MCP server of a tool offered as `<server>__<tool>` (docs/mcp.md); undefined for a built-in. */
export function serverOf(toolName: string): string | undefined {
  const at = toolName.indexOf('__');
  return at > 0 && at + 2 < toolName.length ? toolName.slice(0, at) : undefined;
}

/** Opens the turn (and step) a window starts inside, as if their starts had been folded. */
function syncMidTurn(state: LogState, seq: number, turn: number, type: string, step: unknown) {
  state.apply({ seq: seq - 1, type: 'turn/start', data: { turn, inputId: '' } } as CoreEvent);
  if (typeof step === 'number' && type !== 'step/start' && type !== 'turn/end') {
    state.apply({ seq: seq - 1, type: 'step/start', data: { turn, step } } as CoreEvent);
  }
}

/** Items that changed after `cutSeq` (the compare view shows each side from its cut). */
export function itemsAfter(items: readonly ConversationItem[], cutSeq: number): ConversationItem[] {
  return items.filter((item) => item.seqs.some((s) => s > cutSeq));
}

/** One line describing an event in the raw timeline. */
/** An event's one-line summary (the timeline's, the compare view's), as it may be shown: what came from outside cannot hide in it (core/visible-text.ts). */
/** At most a line's worth (the column ends it in …): a call's arguments, a list of tools or paths may be megabytes long. */
const SUMMARY_CHARS = 300;

export const eventSummary = (e: LogEvent): string => visibleText(clip(summaryOf(e), SUMMARY_CHARS).replace(/[\t\n\r]+/g, ' '));

function summaryOf(e: LogEvent): string {
  const d = (e.data ?? {}) as Record<string, unknown>;
  if (e.type === 'plugin/agent/error') return `turn ${num(d.turn)} step ${num(d.step)}: ${clip(str(d.message))}`;
  if (e.type === FILES_CHANGE) {
    const changes = fileChangesOf(d);
    const listed = (deleted: boolean) =>
      changes
        .filter((c) => c.deleted === deleted)
        .map((c) => c.path)
        .join(', ');
    return [`${str(d.callId)} files`, listed(false) && `wrote ${listed(false)}`, listed(true) && `deleted ${listed(true)}`].filter(Boolean).join(' · ');
  }
  const ev = asCoreEvent(e as CoreEvent);
  switch (ev.type) {
    case 'inbox/add':
      return `${str(d.inputId)}: ${clip(str(d.text))}`;
    case 'inbox/remove':
      return `${str(d.inputId)} ${str(d.reason)}`;
    case 'turn/start':
      return `turn ${num(d.turn)} ← ${str(d.inputId)}`;
    case 'step/start':
      return `turn ${num(d.turn)} step ${num(d.step)}`;
    case 'model/message': {
      const calls = Array.isArray(d.toolCalls) ? (d.toolCalls as Array<Record<string, unknown>>) : [];
      const callText = calls.map((c) => `${str(c.name)}(${str(c.arguments)})`).join(', ');
      return [clip(str(d.text)), callText && `calls ${callText}`].filter(Boolean).join(' · ');
    }
    case 'tool/result':
      return `${str(d.callId)} ${str(d.status)}: ${clip(str(d.content))}`;
    case 'step/end':
      return `turn ${num(d.turn)} step ${num(d.step)} ${str(d.reason)}`;
    case 'turn/end':
      return `turn ${num(d.turn)} ${str(d.reason)}`;
    case 'session/end-seed':
      return `forked from ${str(d.parentSessionId)} at event ${num(d.cutSeq)} (${num(d.inheritedEventCount)} inherited)`;
    case 'session/title':
      return str(d.title);
    case 'session/model':
      return `${str(d.provider)}/${str(d.model)}`;
    case 'session/tools':
      return toolSetText(d.tools);
    case 'session/instructions':
      return clip(str(d.text));
    case 'session/runner-tools':
      return runnerToolsText(d.tools);
    case 'surface/replace':
      return `${num(d.fromSeq)}–${num(d.toSeq)}`;
    case 'tool/approval-request':
      return `${str(d.callId)} awaits approval`;
    case 'tool/approval':
      return `${str(d.callId)} ${str(d.decision)} by ${str(d.by)}${d.reason ? `: ${clip(str(d.reason))}` : ''}`;
    case 'session/tool-approval':
      return toolSetText(d.tools);
    default:
      otherThanCore(ev); // other plugin events
      return clip(JSON.stringify(d));
  }
}

/** A change set's paths, each written or deleted. */
function fileChangesOf(d: Record<string, unknown>): Array<{ path: string; deleted: boolean }> {
  const changes = Array.isArray(d.changes) ? (d.changes as Array<Record<string, unknown>>) : [];
  return changes.map((c) => ({ path: str(c.path), deleted: c.hash === null }));
}

/**
 * The most characters of a list of names a note or a timeline row is made of: a session's tool set may name 500 tools
 * of 200 characters (core/events.ts), which made a `tools:` note of 100,000 characters, built again on each fold.
 */
export const NOTE_LIST_CHARS = 1_000;

/** Names joined while they fit in NOTE_LIST_CHARS, then how many are left out: `a, b, … and 480 more (500 in all)`. */
function listText(tools: unknown, name: (t: unknown) => string): string {
  if (!Array.isArray(tools)) return '';
  if (!tools.length) return 'none';
  let text = '';
  for (let i = 0; i < tools.length; i++) {
    const next = clip(name(tools[i]), NOTE_LIST_CHARS);
    if (text && text.length + 2 + next.length > NOTE_LIST_CHARS) return `${text}, … and ${tools.length - i} more (${tools.length} in all)`;
    text = text ? `${text}, ${next}` : next;
  }
  return text;
}

const toolSetText = (tools: unknown) => listText(tools, (t) => visibleText(str(t)));
/** A runner's declared tools with their effects: `send_email (side-effects)`. */
const runnerToolsText = (tools: unknown) =>
  listText(tools, (t) => `${visibleText(str((t as Record<string, unknown> | null)?.name))} (${str((t as Record<string, unknown> | null)?.effect)})`);

/** At most `n` characters of `s`, ending in … when cut. */
export const clip = (s: string, n = 120) => (s.length > n ? `${s.slice(0, n - 1)}…` : s);
