// Filtering the events pane by type and by origin (synthetic, inherited, own).
// The server serves the filter (Session.events(types, origin): pages of
// matches read from its indexes), newest first, a page at a time: a million-
// event log costs a page per "Earlier matches", never a page of the log per
// match. Events appended live after the first page pass the same test here.
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { FilteredEventsDocument, type EventOrigin } from '../../generated/graphql.ts';
import { CORE_EVENT_TYPE_NAMES } from '../../../src/core/event-types.ts';
import { forkline } from './api.ts';
import type { LogEvent } from './conversation.ts';
import type { EventPages } from './event-pages.ts';
import { Timeline } from './timeline.tsx';
import { errorText } from './widgets.tsx';

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

/** Matches fetched per page (the newest first, then earlier ones on request). */
const MATCH_PAGE = 200;
const ORIGIN_ARG: Record<Origin, EventOrigin> = { any: 'ANY', synthetic: 'SYNTHETIC', inherited: 'INHERITED', own: 'OWN' };

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

/** The types a filter offers: every core type, and the others (plugin events) seen in the loaded events. */
export function useLoadedTypes(pages: EventPages, version: number): string[] {
  return useMemo(() => [...new Set([...CORE_EVENT_TYPE_NAMES, ...pages.types()])].sort(), [pages, version]);
}

/** The events that pass the filter, from the server, newest page first; earlier pages on request. */
export function FilteredTimeline(props: {
  pages: EventPages;
  version: number;
  filter: EventFilter;
  sessionId: string;
  onFork(seq: number): void;
  busy: boolean;
}) {
  const { pages, filter, sessionId } = props;
  const [served, setServed] = useState<{ events: LogEvent[]; before: string | null; upTo: number } | null>(null);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const generation = useRef(0);

  const load = async (gen: number, before: string | null) => {
    setLoading(true);
    // The log's length when asked: later events come from the live pages.
    const upTo = pages.length;
    try {
      const r = await forkline.query(FilteredEventsDocument, {
        id: sessionId,
        types: filter.type ? [filter.type] : null,
        origin: ORIGIN_ARG[filter.origin],
        last: MATCH_PAGE,
        before: before ?? String(upTo),
      });
      if (gen !== generation.current) return;
      const conn = r.session?.events;
      const page = conn?.edges.map((e) => e.node) ?? [];
      const earlier = conn?.pageInfo.hasPreviousPage ? (conn.pageInfo.startCursor ?? null) : null;
      setServed((prev) => (before && prev ? { events: [...page, ...prev.events], before: earlier, upTo: prev.upTo } : { events: page, before: earlier, upTo }));
      setError(null);
    } catch (err) {
      if (gen === generation.current) setError(errorText(err));
    } finally {
      if (gen === generation.current) setLoading(false);
    }
  };
  useEffect(() => {
    const gen = ++generation.current;
    setServed(null);
    void load(gen, null);
  }, [sessionId, filter.type, filter.origin]);

  // Live appends after the served pages, tested here as the server would.
  const live = useMemo(() => {
    if (!served) return [];
    const out: LogEvent[] = [];
    for (let seq = served.upTo; seq < pages.length; seq++) {
      const e = pages.get(seq);
      if (e && matches(e, filter)) out.push(e);
    }
    return out;
  }, [served, pages, props.version, filter]);
  const shown = served ? [...served.events, ...live] : [];
  return (
    <div class="scroll filtered" data-testid="filtered-timeline">
      <p class="filter-note muted" role="status">
        {served ? `${shown.length} matching event${shown.length === 1 ? '' : 's'} shown` : 'Filtering…'}
        {served?.before ? ', the latest first (served by the server: earlier ones on request)' : served ? ' (every match in the log)' : ''}.{' '}
        {served?.before && (
          <button type="button" class="small" onClick={() => void load(generation.current, served.before)} disabled={loading}>
            {loading ? 'Loading…' : 'Earlier matches'}
          </button>
        )}
        {error && <span class="error-text"> {error}</span>}
      </p>
      <Timeline events={shown} onFork={props.onFork} busy={props.busy} sessionId={props.sessionId} />
    </div>
  );
}
