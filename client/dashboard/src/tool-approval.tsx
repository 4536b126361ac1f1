// A tool call awaiting approval, where the call is in the conversation
// (docs/contract.md#tool-approval): the tool and its input are shown by the
// call above it; this asks Approve, or Deny with an optional reason
// (approveToolCall, denyToolCall). The decision and the turn going on arrive
// through the session's feed like every other event; once decided, the call
// shows who decided what and why.
import { useState } from 'preact/hooks';
import { DashboardApproveToolCallDocument, DashboardDenyToolCallDocument } from '../../generated/graphql.ts';
import type { ToolCallView } from './conversation.ts';
import { forkline } from './api.ts';
import { Badge, errorText } from './widgets.tsx';
import { MAX_APPROVAL_REASON_CHARS } from '../../../src/core/text-limits.ts';
import './tool-approval.css';
import { visibleText } from '../../../src/core/visible-text.ts';

export function ApprovalPrompt({ sessionId, call }: { sessionId: string; call: ToolCallView }) {
  const [reason, setReason] = useState('');
  const [denying, setDenying] = useState(false);
  const [sending, setSending] = useState<'approve' | 'deny' | null>(null);
  const [error, setError] = useState<string | null>(null);
  const decide = async (decision: 'approve' | 'deny') => {
    setSending(decision);
    setError(null);
    try {
      const input = { sessionId, callId: call.id, reason: decision === 'deny' ? reason.trim() || null : null };
      if (decision === 'approve') await forkline.mutate(DashboardApproveToolCallDocument, { input });
      else await forkline.mutate(DashboardDenyToolCallDocument, { input });
      // The prompt goes when the feed brings the decision (tool/approval).
    } catch (err) {
      setError(errorText(err));
      setSending(null);
    }
  };
  const reasonId = `deny-reason-${call.id}`;
  return (
    <div
      class="approval-prompt"
      data-testid="approval-prompt"
      data-call-id={call.id}
      role="group"
      aria-label={`Approval for ${visibleText(call.name)} (${call.id})`}
    >
      <p class="approval-question">
        <Badge tone="status-waiting">waiting</Badge> This call waits for your decision: approved, the tool runs once; denied, it never runs and the model is
        told why.
      </p>
      {denying ? (
        <form
          class="approval-deny"
          onSubmit={(e) => {
            e.preventDefault();
            void decide('deny');
          }}
        >
          <label for={reasonId}>Reason (optional, the model is told)</label>
          <input
            id={reasonId}
            value={reason}
            maxLength={MAX_APPROVAL_REASON_CHARS}
            autoFocus
            onInput={(e) => setReason(e.currentTarget.value)}
            onKeyDown={(e) => e.key === 'Escape' && setDenying(false)}
          />
          <div class="approval-actions">
            <button type="submit" class="small danger" disabled={sending !== null}>
              {sending === 'deny' ? 'Denying…' : `Deny ${visibleText(call.name)}`}
            </button>
            <button type="button" class="small" onClick={() => setDenying(false)} disabled={sending !== null}>
              Back
            </button>
          </div>
        </form>
      ) : (
        <div class="approval-actions">
          <button type="button" class="small primary" onClick={() => void decide('approve')} disabled={sending !== null}>
            {sending === 'approve' ? 'Approving…' : `Approve ${visibleText(call.name)}`}
          </button>
          <button type="button" class="small" onClick={() => setDenying(true)} disabled={sending !== null}>
            Deny…
          </button>
        </div>
      )}
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
    </div>
  );
}

/** The decision recorded on a call (tool/approval): who decided and why. */
export function ApprovalDecision({ approval }: { approval: NonNullable<ToolCallView['approval']> & { state: 'approved' | 'denied' } }) {
  return (
    <div class={`approval-decision approval-${approval.state}`} data-testid="approval-decision" data-decision={approval.state}>
      <Badge tone={approval.state === 'approved' ? 'status-ok' : 'status-error'}>{approval.state}</Badge>
      {approval.by && <span class="muted"> by {approval.by}</span>}
      {approval.reason && <span>: {approval.reason}</span>}
      <span class="seq">#{approval.seq}</span>
    </div>
  );
}
