// Filtering the events pane by type and by origin (synthetic, inherited, own).
// A log may hold a million events: the filter reads only the pages this page
// has already fetched (EventPages.loaded), says so, and widens on request a
// few pages at a time, never the whole log.
import { useMemo, useState } from 'preact/hooks';
import type { LogEvent } from './conversation.ts';
import { PAGE_SIZE, type EventPages } from './event-pages.ts';
import { Timeline } from './timeline.tsx';

export type Origin = 'any' | 'synthetic' | 'inherited' | 'own';

export interface EventFilter {
  type: string;
  origin: Origin;
}

export const NO_FILTER: EventFilter = { type: '', origin: 'any' };
export const isFiltering = (f: EventFilter) => f.type !== '' || f.origin !== 'any';

export function matches(e: LogEvent, f: EventFilter): boolean {
  if (f.type && e.type !== f.type) return false;
  if (f.origin === 'synthetic') return e.synthetic;
  if (f.origin === 'inherited') return e.inherited;
  if (f.origin === 'own') return !e.inherited;
  return true;
}

/** Rows rendered at most: the filtered list is not windowed, so it is capped (the latest matches kept). */
const MAX_ROWS = 500;
/** Pages fetched per "Search earlier pages". */
const WIDEN_PAGES = 5;

export function FilterBar({ filter, types, onChange }: { filter: EventFilter; types: readonly string[]; onChange(f: EventFilter): void }) {
  return (
    <div class="filter-bar" role="group" aria-label="Filter events">
      <label>
        type{' '}
        <select value={filter.type} onChange={(e) => onChange({ ...filter, type: e.currentTarget.value })} aria-label="Filter by event type">
          <option value="">all types</option>
          {types.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
      </label>
      <label>
        origin{' '}
        <select value={filter.origin} onChange={(e) => onChange({ ...filter, origin: e.currentTarget.value as Origin })} aria-label="Filter by origin">
          <option value="any">any</option>
          <option value="synthetic">synthetic</option>
          <option value="inherited">inherited</option>
          <option value="own">own (not inherited)</option>
        </select>
      </label>
      {isFiltering(filter) && (
        <button type="button" class="small" onClick={() => onChange(NO_FILTER)}>
          Clear filter
        </button>
      )}
    </div>
  );
}

/** The types seen in the loaded events (the select offers only those that can match). */
export function useLoadedTypes(pages: EventPages, version: number): string[] {
  return useMemo(() => [...new Set(pages.loaded().map((e) => e.type))].sort(), [pages, version]);
}

/** The loaded events that pass the filter, with a note on how much of the log that covers. */
export function FilteredTimeline(props: { pages: EventPages; version: number; filter: EventFilter; sessionId: string; onFork(seq: number): void; busy: boolean }) {
  const { pages, filter } = props;
  const [widening, setWidening] = useState(false);
  const loaded = useMemo(() => pages.loaded(), [pages, props.version]);
  const hits = useMemo(() => loaded.filter((e) => matches(e, filter)), [loaded, filter]);
  const shown = hits.length > MAX_ROWS ? hits.slice(-MAX_ROWS) : hits;
  // The earliest pages not fetched yet, below the first fetched one.
  const unfetched = useMemo(() => {
    const have = new Set(pages.requestedPages);
    const out: number[] = [];
    for (let p = Math.floor((pages.length - 1) / PAGE_SIZE); p >= 0 && out.length < WIDEN_PAGES; p--) if (!have.has(p)) out.push(p);
    return out;
  }, [pages, props.version]);
  const widen = async () => {
    setWidening(true);
    try {
      await Promise.all(unfetched.map((p) => pages.loadPage(p)));
    } finally {
      setWidening(false);
    }
  };
  return (
    <div class="scroll filtered" data-testid="filtered-timeline">
      <p class="filter-note muted" role="status">
        {hits.length} of the {loaded.length} loaded events match
        {loaded.length < pages.length ? ` (the log has ${pages.length}; only loaded pages are searched)` : ' (the whole log is loaded)'}
        {hits.length > MAX_ROWS && `; the latest ${MAX_ROWS} shown`}.{' '}
        {unfetched.length > 0 && (
          <button type="button" class="small" onClick={widen} disabled={widening}>
            {widening ? 'Loading…' : `Load ${unfetched.length} more page${unfetched.length === 1 ? '' : 's'}`}
          </button>
        )}
      </p>
      <Timeline events={shown} onFork={props.onFork} busy={props.busy} sessionId={props.sessionId} />
    </div>
  );
}
