// A query read again whenever sessionsChanged names a session it shows (or a
// new one that belongs there): the fan-out view and the family tree follow
// their sessions this way. Re-reads are coalesced (one in flight, one queued).
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { SessionsChangedDocument, type SessionsChangedSubscription } from '../../generated/graphql.ts';
import { followListening, forkline, oneAtATime } from './api.ts';
import { errorText } from './widgets.tsx';

type Changed = SessionsChangedSubscription['sessionsChanged'];

/**
 * `read`'s result (undefined while the first read runs), read again shortly
 * after each change `concerns` (given the last result) says is about it.
 * `key` names what is read: a new key starts over. `anchor`: a session the
 * page shows, which the subscription sends first once it listens.
 */
export function useLiveQuery<T>(key: string, anchor: string, read: () => Promise<T>, concerns: (changed: Changed, last: T | undefined) => boolean) {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const last = useRef<T | undefined>(undefined);
  useEffect(() => {
    let closed = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    last.current = undefined;
    setValue(undefined);
    // One read at a time, and one more queued when asked meanwhile.
    const run = oneAtATime(
      async () => {
        try {
          const v = await read();
          if (!closed) {
            last.current = v;
            setValue(v);
            setError(null);
          }
        } catch (err) {
          if (!closed) setError(errorText(err));
        }
      },
      () => closed,
    );
    // The first read goes out at once, and the server may register the subscription after it is answered: a
    // change in between would be lost. So the subscription starts with the anchor's row, sent once it listens,
    // and that first row (after each connect) has everything read again.
    const soon = () => {
      clearTimeout(timer);
      timer = setTimeout(run, 60);
    };
    const stop = followListening(() => forkline.subscribe(SessionsChangedDocument, { startWith: [anchor] }), {
      first: soon,
      next: ({ sessionsChanged: s }) => {
        if (concerns(s, last.current)) soon();
      },
      reconnecting: () => !closed && setError('live updates: reconnecting…'),
      // Back after a lost connection: what changed meanwhile (or a first read that failed) is read again.
      resumed: () => {
        if (closed) return;
        setError(null);
        run();
      },
    });
    run();
    return () => {
      closed = true;
      clearTimeout(timer);
      stop();
    };
  }, [key]);
  return { value, error };
}

/**
 * A live-query page before it has something to show: loading (or the first
 * read's error), or the session it names gone. Null once `value` is there.
 */
export function pendingPage(pageClass: string, id: string, value: unknown, error: string | null) {
  if (value === undefined)
    return (
      <main id="main" tabIndex={-1} class={`${pageClass} loading`}>
        {error ? <p class="error">{error}</p> : 'Loading…'}
      </main>
    );
  if (value === null)
    return (
      <main id="main" tabIndex={-1} class={pageClass}>
        <p class="error" role="alert">
          No session {id}: it does not exist or was deleted.
        </p>
      </main>
    );
  return null;
}

/** A live-query page's heading, its one line of context, and the latest read's error (the page keeps what it showed). */
export function LivePageHead(props: { title: ComponentChildren; error: string | null; children: ComponentChildren }) {
  return (
    <>
      <header class="session-head">
        <div class="session-title">
          <h1>{props.title}</h1>
          <div class="meta">{props.children}</div>
        </div>
      </header>
      {props.error && (
        <p class="error" role="alert">
          {props.error}
        </p>
      )}
    </>
  );
}
