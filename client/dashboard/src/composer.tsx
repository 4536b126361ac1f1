// The session page's composer: sends a message (Ctrl+Enter), cancels the
// running turn. It counts characters and refuses a message over the server's
// limit before Send, in words, and takes the focus when its session was just
// created (so Create → typing is one step). A banner left by a send that could
// not reach the server clears when the live feed is back (`resumed`).
import { useEffect, useRef, useState } from 'preact/hooks';
import { DashboardCancelTurnDocument, SendMessageDocument } from '../../generated/graphql.ts';
import { MAX_MESSAGE_CHARS } from '../../../src/core/text-limits.ts';
import { forkline } from './api.ts';
import { errorText } from './widgets.tsx';

/** Show the count from this many characters on (short messages need no counter). */
const COUNT_FROM = 1_000;
const n = (x: number) => x.toLocaleString('en-US');

let focusFor: string | undefined;
/** The next composer of this session takes the focus when it appears (after Create). */
export function focusComposerOf(sessionId: string) {
  focusFor = sessionId;
}

/** What is wrong with `text` as a message, in words, or undefined when it may be sent. */
export function tooLong(length: number): string | undefined {
  if (length <= MAX_MESSAGE_CHARS) return undefined;
  return `This message has ${n(length)} characters; a message may have at most ${n(MAX_MESSAGE_CHARS)}. Shorten it by ${n(length - MAX_MESSAGE_CHARS)} characters or send it in parts.`;
}

export function Composer({ sessionId, running, pending, resumed }: { sessionId: string; running: boolean; pending: number; resumed: number }) {
  const [text, setText] = useState('');
  const [error, setError] = useState<string | null>(null);
  const [sending, setSending] = useState(false);
  const box = useRef<HTMLTextAreaElement>(null);
  useEffect(() => {
    if (focusFor !== sessionId) return;
    focusFor = undefined;
    box.current?.focus();
  }, [sessionId]);
  useEffect(() => setError(null), [resumed]);
  const refusal = tooLong(text.length);
  const send = async () => {
    if (!text.trim() || sending || refusal) return;
    setSending(true);
    setError(null);
    try {
      await forkline.mutate(SendMessageDocument, { input: { sessionId, text } });
      setText('');
    } catch (err) {
      setError(errorText(err));
    } finally {
      setSending(false);
    }
  };
  const cancel = async () => {
    try {
      await forkline.mutate(DashboardCancelTurnDocument, { sessionId });
    } catch (err) {
      setError(errorText(err));
    }
  };
  return (
    <form
      class="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      <textarea
        ref={box}
        id="composer"
        aria-label="Message"
        aria-describedby="composer-count"
        aria-invalid={refusal ? true : undefined}
        placeholder="Message (Ctrl+Enter to send). Scripted model cues: !call clock {} · !then · !slow 80 · !fail why"
        rows={3}
        value={text}
        onInput={(e) => setText(e.currentTarget.value)}
        onKeyDown={(e) => {
          if (e.key === 'Enter' && (e.ctrlKey || e.metaKey)) {
            e.preventDefault();
            void send();
          }
        }}
      />
      {refusal && (
        <p class="error composer-refusal" role="alert">
          {refusal}
        </p>
      )}
      <div class="composer-bar">
        <span class="muted">
          {running ? 'A turn is running.' : 'Idle.'} {pending > 0 && `${pending} queued.`}
        </span>
        <span id="composer-count" class={`char-count${refusal ? ' over' : ''}`} aria-live="polite">
          {text.length >= COUNT_FROM || refusal ? `${n(text.length)} / ${n(MAX_MESSAGE_CHARS)} characters` : ''}
        </span>
        {error && <span class="error">{error}</span>}
        <button type="button" onClick={cancel} disabled={!running}>
          Cancel turn
        </button>
        <button type="submit" class="primary" disabled={sending || !text.trim() || !!refusal}>
          Send
        </button>
      </div>
    </form>
  );
}
