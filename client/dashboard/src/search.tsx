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

export type SearchHit = SearchSessionsQuery['searchSessions']['edges'][number]['node'];

const PAGE = 20;
const DEBOUNCE_MS = 250;
const KIND_LABEL: Record<SearchHit['kind'], string> = { TITLE: 'title', INPUT: 'input', MESSAGE: 'answer' };

export function Snippet({ text }: { text: string }) {
  return <>{snippetParts(text).map((p, i) => (p.match ? <b key={i}>{p.text}</b> : p.text))}</>;
}

/** Hits of `query` (debounced), a page at a time; stale answers are dropped. */
function useSearch(query: string) {
  const [hits, setHits] = useState<SearchHit[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [loading, setLoading] = useState(false);
  const generation = useRef(0);

  const load = async (gen: number, after: string | null) => {
    setLoading(true);
    try {
      const r = await forkline.query(SearchSessionsDocument, { query, first: PAGE, after });
      if (gen !== generation.current) return;
      const page = r.searchSessions.edges.map((e) => e.node);
      setHits((prev) => (after ? [...prev, ...page] : page));
      setNext(r.searchSessions.pageInfo.hasNextPage ? (r.searchSessions.pageInfo.endCursor ?? null) : null);
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
    setLoading(true);
    const timer = setTimeout(() => void load(gen, null), DEBOUNCE_MS);
    return () => clearTimeout(timer);
  }, [query]);

  return { hits, error, loading, more: next ? () => void load(generation.current, next) : null };
}

export function SearchResults({ query, currentId }: { query: string; currentId?: string }) {
  const { hits, error, loading, more } = useSearch(query);
  return (
    <nav class="tree search-results" aria-label="Search results" aria-busy={loading}>
      {error && <p class="error">{error}</p>}
      {hits.length > 0 && (
        <ul>
          {hits.map((h) => (
            <li key={`${h.session.id}@${h.kind}@${h.seq}`} data-session-id={h.session.id} data-seq={h.seq}>
              <a
                href={eventPath(h.session.id, h.seq)}
                class={`tree-link search-hit${h.session.id === currentId ? ' current' : ''}`}
              >
                <span class="tree-title">{h.kind === 'TITLE' ? <Snippet text={h.snippet} /> : h.session.title || 'Untitled'}</span>
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
      {!loading && !error && hits.length === 0 && <p class="muted">No session matches.</p>}
      {loading && <p class="muted">Searching…</p>}
      {more && !loading && (
        <button type="button" class="small more-hits" onClick={more}>
          More results
        </button>
      )}
    </nav>
  );
}
