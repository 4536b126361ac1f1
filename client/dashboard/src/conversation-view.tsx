// Renders a folded conversation: messages, tool calls with their results
// (synthetic ones marked with their wording), fork markers and turn ends.
import type { ConversationItem, ToolCallView } from './conversation.ts';
import type { LiveStep } from './session-log.ts';
import { onLinkClick, sessionPath } from './router.ts';
import { Badge } from './widgets.tsx';

const RESULT_LABELS: Record<string, string> = {
  ok: 'ok',
  error: 'error',
  interrupted: 'interrupted: the session stopped during the call',
  'not-started': 'forked: not run in this branch',
};

export function ConversationView(props: {
  items: readonly ConversationItem[];
  live?: LiveStep | null;
  /** Offers "Branch from here" on ended turns. */
  onBranch?: (turnEndSeq: number, turn: number) => void;
  busy?: boolean;
  parentTitle?: string | null;
}) {
  return (
    <ol class="conversation" aria-label="Conversation">
      {props.items.map((item) => (
        <Item key={`${item.kind}-${item.seqs[0]}`} item={item} {...props} />
      ))}
      {props.live && (props.live.text || props.live.tool) && (
        <li class="msg assistant streaming" data-testid="live-text" aria-live="polite">
          <div class="msg-head">
            assistant · turn {props.live.turn} step {props.live.step} <Badge tone="live">streaming</Badge>
          </div>
          {props.live.text && <div class="msg-text">{props.live.text}</div>}
          {props.live.tool && <div class="muted">running {props.live.tool}…</div>}
        </li>
      )}
    </ol>
  );
}

function Item({
  item,
  onBranch,
  busy,
  parentTitle,
}: {
  item: ConversationItem;
  onBranch?: (turnEndSeq: number, turn: number) => void;
  busy?: boolean;
  parentTitle?: string | null;
}) {
  const inherited = item.inherited ? ' inherited' : '';
  switch (item.kind) {
    case 'user':
      return (
        <li class={`msg user${inherited}`} data-seq={item.seqs[0]} data-input-id={item.inputId}>
          <div class="msg-head">
            you <Seq seq={item.seqs[0]} />
            {item.state !== 'taken' && <Badge tone={item.state}>{item.state}</Badge>}
          </div>
          <div class="msg-text">{item.text}</div>
        </li>
      );
    case 'assistant':
      return (
        <li class={`msg assistant${inherited}`} data-seq={item.seqs[0]}>
          <div class="msg-head">
            assistant · turn {item.turn} step {item.step} <Seq seq={item.seqs[0]} />
          </div>
          {item.text && <div class="msg-text">{item.text}</div>}
          {item.toolCalls.map((call) => (
            <ToolCall key={call.id} call={call} />
          ))}
        </li>
      );
    case 'fork-marker':
      return (
        <li class="fork-marker" data-seq={item.seqs[0]} data-testid="fork-marker">
          <span>
            Forked from{' '}
            <a href={sessionPath(item.parentSessionId)} onClick={onLinkClick}>
              {parentTitle || item.parentSessionId}
            </a>{' '}
            at event {item.cutSeq} · {item.inheritedEventCount} events inherited
          </span>
          <Seq seq={item.seqs[0]} />
        </li>
      );
    case 'turn-end':
      return (
        <li class={`turn-end reason-${item.reason}${inherited}`} data-seq={item.seqs[0]} data-turn={item.turn}>
          <span>
            turn {item.turn} <Badge tone={`reason-${item.reason}`}>{item.reason}</Badge>
            {item.synthetic && <Badge tone="synthetic">synthetic</Badge>}
          </span>
          <span class="turn-end-actions">
            <Seq seq={item.endSeq} />
            {onBranch && (
              <button
                type="button"
                class="small"
                disabled={busy}
                title={`New session with events through this turn's end (seq ${item.endSeq})`}
                onClick={() => onBranch(item.endSeq, item.turn)}
              >
                Branch from here
              </button>
            )}
          </span>
        </li>
      );
    case 'step-end':
      return (
        <li class={`step-end reason-${item.reason}${inherited}`} data-seq={item.seqs[0]}>
          turn {item.turn} step {item.step} ended <Badge tone={`reason-${item.reason}`}>{item.reason}</Badge>
          {item.synthetic && <Badge tone="synthetic">synthetic</Badge>}
        </li>
      );
    case 'note':
      return (
        <li class={`note${inherited}`} data-seq={item.seqs[0]}>
          {item.text} <Seq seq={item.seqs[0]} />
        </li>
      );
  }
}

function ToolCall({ call }: { call: ToolCallView }) {
  const r = call.result;
  return (
    <div class="tool-call" data-call-id={call.id}>
      <div class="tool-head">
        <code>
          {call.name}({call.arguments === '{}' ? '' : call.arguments})
        </code>
        <span class="muted">{call.id}</span>
      </div>
      {r ? (
        <div class={`tool-result status-${r.status}${r.synthetic ? ' synthetic' : ''}`} data-testid="tool-result" data-status={r.status}>
          <div class="tool-result-head">
            <Badge tone={`status-${r.status}`}>{RESULT_LABELS[r.status] ?? r.status}</Badge>
            {r.synthetic && (
              <Badge tone="synthetic" title="Written by repair, not by the tool">
                synthetic
              </Badge>
            )}
            <Seq seq={r.seq} />
          </div>
          <div class="tool-result-text">{r.content}</div>
        </div>
      ) : (
        <div class="tool-result pending muted" data-testid="tool-waiting">
          {call.waiting === 'running' ? 'running…' : 'no result recorded (its step ended without one)'}
        </div>
      )}
    </div>
  );
}

const Seq = ({ seq }: { seq: number }) => <span class="seq">#{seq}</span>;
