// "Compact" asks first (docs/long-sessions.md#compaction): what compaction
// does, optional instructions for the summary (compactSession's
// `instructions`), then, once the summary is written, the history's size
// before and the summary's after, in tokens as the context budget estimates them.
import { useState } from 'preact/hooks';
import { CompactSessionDocument, type CompactSessionMutation } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { Modal, useSubmit } from './dialogs.tsx';
import { MAX_COMPACTION_INSTRUCTIONS_CHARS as MAX_INSTRUCTIONS_CHARS } from '../../../src/core/text-limits.ts';

const n = (x: number) => x.toLocaleString('en-US');

type Done = Omit<CompactSessionMutation['compactSession'], 'session'>;

export function CompactDialog(props: { sessionId: string; onClose(): void }) {
  const [instructions, setInstructions] = useState('');
  const [done, setDone] = useState<Done | null>(null);
  const { busy, error, submit } = useSubmit(async () => {
    const text = instructions.trim();
    const { compactSession } = await forkline.mutate(CompactSessionDocument, { input: { sessionId: props.sessionId, instructions: text || null } });
    setDone(compactSession);
  });
  if (done)
    return (
      <Modal
        title="History compacted"
        submitLabel="Close"
        cancelLabel={null}
        closeOnBackdrop
        busy={false}
        error={null}
        onClose={props.onClose}
        onSubmit={props.onClose}
      >
        <p data-testid="compact-result" data-tokens-before={done.tokensBefore} data-tokens-after={done.tokensAfter}>
          Events #{done.fromSeq}–#{done.toSeq} are summarised (the summary is event #{done.summarySeq}). The model read about{' '}
          <strong>{n(done.tokensBefore)} tokens</strong> of that history; it now reads about <strong>{n(done.tokensAfter)} tokens</strong> of summary instead.
        </p>
        <p class="muted">Estimated at about four characters a token, as the context budget counts them.</p>
      </Modal>
    );
  return (
    <Modal title="Compact this session?" submitLabel="Compact" closeOnBackdrop={!busy} busy={busy} error={error} onClose={props.onClose} onSubmit={submit}>
      <p>
        The session's model summarises the history through the end of its last completed turn. From the next turn on, the model reads that summary instead of
        the history, which keeps long sessions within its context window. Nothing is deleted: every event stays in the log and on this page, and forks are
        unchanged.
      </p>
      <label class="field">
        Instructions for the summary (optional)
        <textarea
          value={instructions}
          rows={3}
          maxLength={MAX_INSTRUCTIONS_CHARS}
          placeholder="e.g. keep the file names and the open questions"
          onInput={(e) => setInstructions(e.currentTarget.value)}
          autoFocus
        />
      </label>
      {busy && <p aria-live="polite">Summarising… (a running turn is waited for first)</p>}
    </Modal>
  );
}
