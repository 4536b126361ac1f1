// Renders a folded conversation: messages, tool calls with their results
// (synthetic ones marked with their wording), fork markers and turn ends.
import { clip, takenUnstartedText, type ConversationItem, type ToolCallView } from './conversation.ts';
import type { LiveStep } from './session-log.ts';
import { sessionPath } from './router.ts';
import { formatDuration, shownName } from './format.ts';
import { CallFiles } from './files-tab.tsx';
import { TurnStatsLine } from './turn-stats.tsx';
import { Badge, EffectBadge } from './widgets.tsx';
import { isLongText, LongText } from './long-text.tsx';
import { ApprovalDecision, ApprovalPrompt } from './tool-approval.tsx';
import { visibleLines, visibleText } from '../../../src/core/visible-text.ts';

/** A note's text shown at most (the fold bounds the notes it makes; a plugin's type or an old log's may be longer). */
const NOTE_SHOWN_CHARS = 2_000;

const RESULT_LABELS: Record<string, string> = {
  ok: 'ok',
  error: 'error',
  interrupted: 'interrupted: the session stopped during the call',
  'not-started': 'forked: not run in this branch',
};

export interface ItemProps {
  /** Offers "Branch from turn N" on ended turns. */
  onBranch?: (turnEndSeq: number, turn: number) => void;
  /** Offers "Edit" on user messages (edit and re-run in a new session). */
  onEdit?: (input: { seq: number; inputId: string; text: string }) => void;
  /** Offers "Fork here" on assistant steps and "Fork before this result" on tool results (fork at that seq). */
  onFork?: (seq: number) => void;
  busy?: boolean;
  /** Title of a fork marker's parent (each marker names its own ancestor). */
  titleOf?: (sessionId: string) => string | null | undefined;
  /** The session shown: ended turns show their timing and usage (turn-stats.tsx). */
  sessionId?: string;
}

export const itemKey = (item: { kind: string; seqs: number[] }) => `${item.kind}-${item.seqs[0]}`;

/** The running step's text as it streams, until its model/message is stored. */
export function LiveStepItem({ live, row }: { live: LiveStep; row?: RowProps }) {
  return (
    <li {...row} class="msg assistant streaming" data-testid="live-text" aria-live="polite">
      <div class="msg-head">
        assistant · turn {live.turn} step {live.step} <Badge tone="live">streaming</Badge>
      </div>
      {live.text && <div class="msg-text">{visibleLines(live.text)}</div>}
      {live.tool && <div class="muted">running {shownName(live.tool)}…</div>}
    </li>
  );
}

/** Placement of an item in a windowed list (see conversation-pane.tsx), spread on its root element. */
export interface RowProps {
  'data-index': number;
  ref: (el: Element | null) => void;
  style: Record<string, string>;
  /** The seq jumped to is in this item. */
  'data-target'?: boolean;
}

export function Item({ item, onBranch, onEdit, onFork, busy, titleOf, sessionId, row }: ItemProps & { item: ConversationItem; row?: RowProps }) {
  const inherited = item.inherited ? ' inherited' : '';
  switch (item.kind) {
    case 'user':
      return (
        <li {...row} class={`msg user${inherited}`} data-seq={item.seqs[0]} data-input-id={item.inputId}>
          <div class="msg-head">
            you <Seq seq={item.seqs[0]} />
            {item.state !== 'taken' && <Badge tone={item.state}>{item.state}</Badge>}
            {onEdit && (
              <button
                type="button"
                class="small edit-button"
                disabled={busy}
                aria-label={`Edit and re-run #${item.seqs[0]}`}
                title="Edit and re-run: a new session forked right before this message, answering your edited text (this one is not changed)"
                onClick={() => onEdit({ seq: item.seqs[0], inputId: item.inputId, text: item.text })}
              >
                Edit
              </button>
            )}
          </div>
          <LongText text={item.text} id={`${sessionId}:${item.seqs[0]}`} />
        </li>
      );
    case 'assistant':
      return (
        <li {...row} class={`msg assistant${inherited}`} data-seq={item.seqs[0]}>
          <div class="msg-head">
            assistant · turn {item.turn} step {item.step} <Seq seq={item.seqs[0]} />
            {onFork && <ForkButton seq={item.seqs[0]} busy={busy} onFork={onFork} title="A new session with the log through this step's message" />}
          </div>
          {item.text && <LongText text={item.text} id={`${sessionId}:${item.seqs[0]}`} />}
          {item.toolCalls.map((call) => (
            <ToolCall
              key={call.id}
              call={call}
              closerBelow={call.result?.afterMarker}
              onFork={onFork}
              busy={busy}
              sessionId={item.inherited ? undefined : sessionId}
            />
          ))}
        </li>
      );
    case 'fork-marker':
      return (
        <li {...row} class="fork-marker" data-seq={item.seqs[0]} data-testid="fork-marker">
          <span>
            Forked from <a href={sessionPath(item.parentSessionId)}>{visibleText(titleOf?.(item.parentSessionId) || item.parentSessionId)}</a> at event{' '}
            {item.cutSeq} · {item.inheritedEventCount.toLocaleString('en-US')} events inherited
          </span>
          <Seq seq={item.seqs[0]} />
          {item.takenUnstarted?.map((u) => (
            <p key={u.inputId} class="fork-unanswered" data-testid="fork-unanswered">
              {takenUnstartedText(u)}
            </p>
          ))}
        </li>
      );
    case 'turn-end':
      return (
        <li {...row} class={`turn-end reason-${item.reason}${inherited}`} data-seq={item.seqs[0]} data-turn={item.turn}>
          <span>
            turn {item.turn} <Badge tone={`reason-${item.reason}`}>{item.reason}</Badge>
            {item.synthetic && <Badge tone="synthetic">synthetic</Badge>}
          </span>
          {sessionId && <TurnStatsLine sessionId={sessionId} endSeq={item.endSeq} />}
          <span class="turn-end-actions">
            <Seq seq={item.endSeq} />
            {item.retry && onEdit && (
              <button
                type="button"
                class="small"
                disabled={busy}
                title="Run this turn's message again in a new session forked right before it (this session is not changed)"
                onClick={() => item.retry && onEdit(item.retry)}
              >
                Retry turn {item.turn}
              </button>
            )}
            {onBranch && (
              <button
                type="button"
                class="small"
                disabled={busy}
                title={`New session with events through this turn's end (seq ${item.endSeq})`}
                onClick={() => onBranch(item.endSeq, item.turn)}
              >
                {/* Visible text = accessible name, one per turn (screen readers list them apart). */}
                Branch from turn {item.turn}
              </button>
            )}
          </span>
        </li>
      );
    case 'step-end':
      return (
        <li {...row} class={`step-end reason-${item.reason}${inherited}`} data-seq={item.seqs[0]}>
          turn {item.turn} step {item.step} ended <Badge tone={`reason-${item.reason}`}>{item.reason}</Badge>
          {item.synthetic && <Badge tone="synthetic">synthetic</Badge>}
        </li>
      );
    case 'closer-result':
      return (
        <li {...row} class={`msg closer${inherited}`} data-seq={item.seqs[0]}>
          <div class="msg-head">
            closer for the call above the marker <Seq seq={item.seqs[0]} />
          </div>
          <ToolCall call={item.call} />
        </li>
      );
    case 'agent-error':
      return (
        <li {...row} class={`agent-error${inherited}`} data-seq={item.seqs[0]} data-testid="agent-error">
          <div class="agent-error-text">
            <Badge tone="reason-failed">error</Badge> turn {item.turn} step {item.step}:{' '}
            <LongText text={item.message} id={`${sessionId}:${item.seqs[0]}`} class="agent-error-message" />
          </div>
          <Seq seq={item.seqs[0]} />
        </li>
      );
    case 'compaction':
      return (
        <li {...row} class={`compaction${inherited}`} data-seq={item.seqs[0]} data-testid="compaction">
          <details>
            <summary>
              history summarised: seq {item.fromSeq}–{item.toSeq}
            </summary>
            <LongText text={item.summary} id={`${sessionId}:${item.seqs[0]}`} class="compaction-summary" />
          </details>
          <Seq seq={item.seqs[0]} />
        </li>
      );
    case 'note':
      return (
        <li {...row} class={`note${inherited}`} data-seq={item.seqs[0]} title={item.type}>
          <span class="note-text">{visibleLines(clip(item.text, NOTE_SHOWN_CHARS))}</span> <Seq seq={item.seqs[0]} />
        </li>
      );
  }
}

const WAITING_TEXT = {
  running: 'running…',
  unanswered: 'no result recorded (its step ended without one)',
  'not-loaded': 'result not loaded yet (later in the log)',
};

/** A call and its result; `closerBelow`: the result is a fork closer shown after the marker. */
function ToolCall(props: { call: ToolCallView; closerBelow?: boolean; onFork?: (seq: number) => void; busy?: boolean; sessionId?: string }) {
  const { call, closerBelow, onFork, busy, sessionId } = props;
  const r = call.result;
  const approval = call.approval;
  // Arguments are the model's text, of any length: long ones fold like a message (a megabyte line was an item 280,000 px tall).
  const longArgs = isLongText(call.arguments);
  return (
    <div class="tool-call" data-call-id={call.id} data-server={call.server} data-effect={call.effect}>
      <div class="tool-head">
        <code>
          {visibleText(call.name)}({call.arguments === '{}' ? '' : longArgs ? '…' : visibleLines(call.arguments)})
        </code>
        <span class="tool-meta">
          {call.server && (
            <Badge tone="tool-server" title={`From the MCP server "${call.server}"`}>
              {call.server}
            </Badge>
          )}
          {call.effect && <EffectBadge effect={call.effect} />}
          <span class="muted">{shownName(call.id)}</span>
        </span>
      </div>
      {longArgs && <LongText text={call.arguments} id={`${sessionId}:${call.id}:arguments`} class="tool-args" />}
      {approval && approval.state !== 'pending' && <ApprovalDecision approval={approval} />}
      {approval?.state === 'pending' && !r && call.waiting !== 'not-loaded' && sessionId && <ApprovalPrompt sessionId={sessionId} call={call} />}
      {r && closerBelow ? (
        <div class="tool-result pending muted">result #{r.seq} written by the fork, below its marker</div>
      ) : r ? (
        <div class={`tool-result status-${r.status}${r.synthetic ? ' synthetic' : ''}`} data-testid="tool-result" data-status={r.status}>
          <div class="tool-result-head">
            <Badge tone={`status-${r.status}`}>{RESULT_LABELS[r.status] ?? r.status}</Badge>
            {r.synthetic && (
              <Badge tone="synthetic" title="Written by repair, not by the tool">
                synthetic
              </Badge>
            )}
            {r.durationMs !== undefined && (
              <span
                class="tool-duration muted"
                title="From the call's start (its message stored, or the previous call's result: a step runs its calls one after another) to its result stored"
              >
                {formatDuration(r.durationMs)}
              </span>
            )}
            <Seq seq={r.seq} />
            {onFork && !r.synthetic && (
              <ForkButton
                seq={r.seq - 1}
                busy={busy}
                onFork={onFork}
                label="Fork before this result"
                title={`A new session cut right before this result (at event ${r.seq - 1}): the call is closed as never run there, to run again`}
              />
            )}
          </div>
          <LongText text={r.content} id={`${sessionId}:${r.seq}`} class="tool-result-text" />
          <CallFiles call={call} />
        </div>
      ) : (
        approval?.state !== 'pending' && (
          <div class={`tool-result pending waiting-${call.waiting}`} data-testid="tool-waiting" data-waiting={call.waiting}>
            {call.waiting === 'running' && <span class="spinner" aria-hidden="true" />}
            {WAITING_TEXT[call.waiting ?? 'unanswered']}
          </div>
        )
      )}
    </div>
  );
}

const Seq = ({ seq }: { seq: number }) => <span class="seq">#{seq}</span>;

/** Fork at `seq`; the accessible name starts with the visible text (voice control) and names the event (the timeline's is "Fork here at event N"). */
function ForkButton(props: { seq: number; busy?: boolean; onFork(seq: number): void; label?: string; title: string }) {
  const label = props.label ?? 'Fork here';
  return (
    <button
      type="button"
      class="small fork-inline"
      disabled={props.busy}
      aria-label={`${label} (event ${props.seq})`}
      title={props.title}
      onClick={() => props.onFork(props.seq)}
    >
      {label}
    </button>
  );
}
