// Titles of the sessions fork markers point at: each marker names its own
// ancestor (a nested fork holds one marker per generation), read once per id.
import { useCallback, useEffect, useState } from 'preact/hooks';
import { SessionDocument } from '../../generated/graphql.ts';
import { forkline } from './api.ts';

const known = new Map<string, Promise<string | null>>();

function titleOf(id: string): Promise<string | null> {
  let title = known.get(id);
  if (!title) {
    title = forkline.query(SessionDocument, { id }).then(
      (r) => r.session?.title ?? null,
      () => (known.delete(id), null),
    );
    known.set(id, title);
  }
  return title;
}

/** id → title for `ids` (unknown ones resolve to their id in the view). */
export function useSessionTitles(ids: readonly string[]): (id: string) => string | null | undefined {
  const [titles, setTitles] = useState<ReadonlyMap<string, string | null>>(new Map());
  const key = [...new Set(ids)].sort().join(',');
  useEffect(() => {
    let closed = false;
    void Promise.all(key ? key.split(',').map(async (id) => [id, await titleOf(id)] as const) : []).then((pairs) => {
      if (!closed) setTitles(new Map(pairs));
    });
    return () => {
      closed = true;
    };
  }, [key]);
  // Stable while the titles are: the conversation's memoized rows keep it as a prop.
  return useCallback((id: string) => titles.get(id), [titles]);
}
