// The sidebar's search results: searchSessions (full-text over titles, user
// inputs and model messages) while the search box is not empty. Each hit
// opens its session at the matching event. Snippets are plain text with the
// matched words between ⟦ and ⟧: they are split and rendered as text nodes
// and <b> elements, never as HTML.
import { useEffect, useRef, useState } from 'preact/hooks';
import { SearchSessionsDocument, type SearchSessionsQuery } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { eventPath } from './router.ts';
import { snippetParts } from './snippet.ts';
import { errorText } from './widgets.tsx';
import { visibleLines, visibleText } from '../../../src/core/visible-text.ts';

export type SearchHit = SearchSessionsQuery['searchSessions']['edges'][number]['node'];

const PAGE = 20;
const DEBOUNCE_MS = 250;
const KIND_LABEL: Record<SearchHit['kind'], string> = { TITLE: 'title', INPUT: 'input', MESSAGE: 'answer' };

export function Snippet({ text }: { text: string }) {
  return <>{snippetParts(visibleLines(text)).map((p, i) => (p.match ? <b key={i}>{p.text}</b> : p.text))}</>;
}

/**
 * Hits of `query` (debounced; none for a blank one), a page at a time through
 * `fetchPage` (a page after a cursor); stale answers are dropped. `scope`
 * starts over when it changes too (e.g. the session searched).
 */
export function usePagedHits<H>(query: string, fetchPage: (query: string, after: string | null) => Promise<{ hits: H[]; next: string | null }>, scope = '') {
  const [hits, setHits] = useState<H[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const generation = useRef(0);
  const q = query.trim();

  const load = async (gen: number, after: string | null) => {
    setLoading(true);
    try {
      const page = await fetchPage(q, after);
      if (gen !== generation.current) return;
      setHits((prev) => (after ? [...prev, ...page.hits] : page.hits));
      setNext(page.next);
      setError(null);
    } catch (err) {
      if (gen === generation.current) setError(errorText(err));
    } finally {
      if (gen === generation.current) setLoading(false);
    }
  };

  useEffect(() => {
    const gen = ++generation.current;
    setHits([]);
    setNext(null);
    setError(null);
    if (!q) return void setLoading(false);
    setLoading(true);
    const timer = setTimeout(() => void load(gen, null), DEBOUNCE_MS);
    return () => clearTimeout(timer);
  }, [q, scope]);

  return { hits, error, loading, more: next ? () => void load(generation.current, next) : null };
}

async function searchSessionsPage(query: string, after: string | null) {
  const r = await forkline.query(SearchSessionsDocument, { query, first: PAGE, after });
  return {
    hits: r.searchSessions.edges.map((e) => e.node),
    next: r.searchSessions.pageInfo.hasNextPage ? (r.searchSessions.pageInfo.endCursor ?? null) : null,
  };
}

export function SearchResults({ query, currentId }: { query: string; currentId?: string }) {
  const { hits, error, loading, more } = usePagedHits(query, searchSessionsPage);
  return (
    <nav class="tree search-results" aria-label="Search results" aria-busy={loading}>
      {error && <p class="error">{error}</p>}
      {hits.length > 0 && (
        <ul>
          {hits.map((h) => (
            <li key={`${h.session.id}@${h.kind}@${h.seq}`} data-session-id={h.session.id} data-seq={h.seq}>
              <a href={eventPath(h.session.id, h.seq)} class={`tree-link search-hit${h.session.id === currentId ? ' current' : ''}`}>
                <span class="tree-title">{h.kind === 'TITLE' ? <Snippet text={visibleText(h.snippet)} /> : visibleText(h.session.title || 'Untitled')}</span>
                <span class="tree-meta">
                  <span class={`hit-kind kind-${h.kind.toLowerCase()}`}>{KIND_LABEL[h.kind]}</span>
                  <span>#{h.seq}</span>
                  {h.descendants > 0 && (
                    <span title="forks that share this event">
                      shared by {h.descendants} fork{h.descendants === 1 ? '' : 's'}
                    </span>
                  )}
                </span>
                {h.kind !== 'TITLE' && (
                  <span class="hit-snippet">
                    <Snippet text={h.snippet} />
                  </span>
                )}
              </a>
            </li>
          ))}
        </ul>
      )}
      {!loading && !error && hits.length === 0 && <p class="muted">{more ? 'No match in the newest messages read so far.' : 'No session matches.'}</p>}
      {loading && <p class="muted">Searching…</p>}
      {more && !loading && (
        <button type="button" class="small more-hits" onClick={more}>
          More results
        </button>
      )}
    </nav>
  );
}
