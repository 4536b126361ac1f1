// A session's instructions (Session.instructions: its last session/instructions
// event), shown folded in the session's details and edited in place
// (setSessionInstructions). Read when the page opens and again when a
// session/instructions event arrives.
import { useEffect, useRef, useState } from 'preact/hooks';
import { SessionInstructionsDocument, SetSessionInstructionsDocument } from '../../generated/graphql.ts';
import { MAX_INSTRUCTIONS_CHARS } from '../../../src/core/text-limits.ts';
import { visibleLines } from '../../../src/core/visible-text.ts';
import { forkline } from './api.ts';
import type { EventPages } from './event-pages.ts';
import { errorText } from './widgets.tsx';

export function SessionInstructions({ sessionId, pages, version }: { sessionId: string; pages: EventPages; version: number }) {
  const [text, setText] = useState<string | null | undefined>(undefined);
  const [draft, setDraft] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [saving, setSaving] = useState(false);
  const [reads, setReads] = useState(0);
  useEffect(() => {
    let live = true;
    forkline.query(SessionInstructionsDocument, { id: sessionId }).then(
      (r) => live && (setText(r.session?.instructions ?? null), setError(null)),
      (err) => live && setError(errorText(err)),
    );
    return () => {
      live = false;
    };
  }, [sessionId, reads]);

  // Only the events appended since the last look are checked (never the whole log).
  const seen = useRef({ sessionId, upTo: pages.length });
  useEffect(() => {
    const from = seen.current.sessionId === sessionId ? seen.current.upTo : pages.length;
    for (let seq = from; seq < pages.length; seq++) {
      if (pages.get(seq)?.type === 'session/instructions') {
        setReads((n) => n + 1);
        break;
      }
    }
    seen.current = { sessionId, upTo: pages.length };
  }, [sessionId, pages, version]);

  const save = async () => {
    if (draft === null) return;
    setSaving(true);
    try {
      const r = await forkline.mutate(SetSessionInstructionsDocument, { input: { sessionId, instructions: draft } });
      setText(r.setSessionInstructions.instructions ?? null);
      setDraft(null);
      setError(null);
    } catch (err) {
      setError(errorText(err));
    } finally {
      setSaving(false);
    }
  };

  return (
    <details class="session-instructions" data-testid="session-instructions">
      <summary>
        Instructions <span class="muted">{text === undefined ? '' : text ? `(${text.length} chars)` : '(none)'}</span>
        {error && <span class="error-text"> · {error}</span>}
      </summary>
      {draft === null ? (
        <>
          {text ? <pre class="instructions-text">{visibleLines(text)}</pre> : <p class="muted">No instructions: the model gets no system prompt.</p>}
          <button type="button" class="small" onClick={() => setDraft(text ?? '')} disabled={text === undefined}>
            Edit instructions
          </button>
        </>
      ) : (
        <form
          onSubmit={(e) => {
            e.preventDefault();
            void save();
          }}
        >
          <textarea
            aria-label="Session instructions"
            rows={6}
            maxLength={MAX_INSTRUCTIONS_CHARS}
            value={draft}
            onInput={(e) => setDraft(e.currentTarget.value)}
          />
          <button type="submit" class="small primary" disabled={saving}>
            Save
          </button>
          <button type="button" class="small" onClick={() => setDraft(null)}>
            Cancel
          </button>
        </form>
      )}
    </details>
  );
}
