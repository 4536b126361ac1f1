// Search within the open session (Session.search: the server's full-text
// index, the inherited prefix included): hits in seq order, a page at a time,
// each a button that jumps both panes to its event, with a marker for the
// events between two hits (how far apart they lie in a long log).
import { useEffect, useState } from 'preact/hooks';
import { SessionSearchDocument, type SessionSearchQuery } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { Snippet, usePagedHits } from './search.tsx';
import './session-search.css';

type Hit = NonNullable<SessionSearchQuery['session']>['search']['edges'][number]['node'];

const PAGE = 20;
const KIND_LABEL: Record<Hit['kind'], string> = { TITLE: 'title', INPUT: 'input', MESSAGE: 'answer' };

/** The events between two hits (or before the first one), as a marker's words; null when they are adjacent. */
export function gapText(from: number, to: number): string | null {
  const n = to - from - 1;
  return n > 0 ? `${n.toLocaleString('en-US')} event${n === 1 ? '' : 's'}` : null;
}

export function SessionSearch({ sessionId, onJump }: { sessionId: string; onJump(seq: number): void }) {
  const [query, setQuery] = useState('');
  const [current, setCurrent] = useState<number | null>(null);
  const { hits, error, loading, more } = usePagedHits<Hit>(
    query,
    async (q, after) => {
      const r = await forkline.query(SessionSearchDocument, { id: sessionId, query: q, first: PAGE, after });
      const conn = r.session?.search;
      return { hits: conn?.edges.map((e) => e.node) ?? [], next: conn?.pageInfo.hasNextPage ? (conn.pageInfo.endCursor ?? null) : null };
    },
    sessionId,
  );
  useEffect(() => setCurrent(null), [query, sessionId]);

  const jump = (seq: number) => {
    setCurrent(seq);
    onJump(seq);
  };
  const q = query.trim();
  return (
    <div class="session-search" role="search" aria-label="Search this session">
      <input
        type="search"
        placeholder="Search this session"
        aria-label="Search this session's inputs and answers"
        value={query}
        onInput={(e) => setQuery(e.currentTarget.value)}
        data-testid="session-search-input"
      />
      {q && (
        <div class="session-search-results" data-testid="session-search-results" aria-busy={loading}>
          {error && <p class="error">{error}</p>}
          {!loading && !error && hits.length === 0 && <p class="muted">No matches in this session.</p>}
          {hits.length > 0 && (
            <ol>
              {hits.map((h, i) => {
                const gap = gapText(i === 0 ? -1 : hits[i - 1].seq, h.seq);
                return (
                  <li key={h.seq}>
                    {gap && (
                      <div class="search-gap muted" data-testid="search-gap" aria-label={`${gap} ${i === 0 ? 'before the first match' : 'between matches'}`}>
                        ⋯ {gap} ⋯
                      </div>
                    )}
                    <button
                      type="button"
                      class={`session-hit${current === h.seq ? ' current' : ''}`}
                      data-seq={h.seq}
                      aria-current={current === h.seq ? 'true' : undefined}
                      onClick={() => jump(h.seq)}
                    >
                      <span class="muted">
                        @{h.seq} {KIND_LABEL[h.kind]}
                      </span>{' '}
                      <Snippet text={h.snippet} />
                    </button>
                  </li>
                );
              })}
            </ol>
          )}
          {loading && <p class="muted">Searching…</p>}
          {more && !loading && (
            <button type="button" class="small" onClick={more}>
              More matches
            </button>
          )}
        </div>
      )}
    </div>
  );
}
