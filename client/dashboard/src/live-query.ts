// A query read again whenever sessionsChanged names a session it shows (or a
// new one that belongs there): the fan-out view and the family tree follow
// their sessions this way. Re-reads are coalesced (one in flight, one queued).
import { useEffect, useRef, useState } from 'preact/hooks';
import { SessionsChangedDocument, type SessionsChangedSubscription } from '../../generated/graphql.ts';
import { follow, forkline } from './api.ts';
import { errorText } from './widgets.tsx';

type Changed = SessionsChangedSubscription['sessionsChanged'];

/**
 * `read`'s result (undefined while the first read runs), read again shortly
 * after each change `concerns` (given the last result) says is about it.
 * `key` names what is read: a new key starts over.
 */
export function useLiveQuery<T>(key: string, read: () => Promise<T>, concerns: (changed: Changed, last: T | undefined) => boolean) {
  const [value, setValue] = useState<T | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  const last = useRef<T | undefined>(undefined);
  useEffect(() => {
    let closed = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    let reading = false;
    let again = false;
    last.current = undefined;
    setValue(undefined);
    const run = async () => {
      if (reading) return void (again = true);
      reading = true;
      try {
        const v = await read();
        if (!closed) {
          last.current = v;
          setValue(v);
          setError(null);
        }
      } catch (err) {
        if (!closed) setError(errorText(err));
      } finally {
        reading = false;
        if (again && !closed) {
          again = false;
          void run();
        }
      }
    };
    // Subscribed before the first read, so a change made meanwhile is not missed.
    const stop = follow(() => forkline.subscribe(SessionsChangedDocument), {
      next: ({ sessionsChanged: s }) => {
        if (!concerns(s, last.current)) return;
        clearTimeout(timer);
        timer = setTimeout(run, 60);
      },
      reconnecting: () => !closed && setError('live updates: reconnecting…'),
    });
    void run();
    return () => {
      closed = true;
      clearTimeout(timer);
      stop();
    };
  }, [key]);
  return { value, error };
}
