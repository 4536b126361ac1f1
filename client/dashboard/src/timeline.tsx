// The raw event log: seq, type, inherited/synthetic badges, a one-line
// summary (the full data on demand) and "Fork at this event" on every row.
// A target seq (a search hit) is highlighted and scrolled to once it is loaded.
import { Fragment } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { eventSummary, type LogEvent } from './conversation.ts';
import { Badge } from './widgets.tsx';

export function Timeline(props: { events: readonly LogEvent[]; onFork?: (seq: number) => void; busy?: boolean; targetSeq?: number }) {
  const [open, setOpen] = useState<number | null>(null);
  const table = useRef<HTMLTableElement>(null);
  const loaded = props.targetSeq !== undefined && props.events.length > props.targetSeq;
  useEffect(() => {
    if (loaded) table.current?.querySelector(`tr[data-seq="${props.targetSeq}"]`)?.scrollIntoView({ block: 'center' });
  }, [loaded, props.targetSeq]);
  return (
    <table class="timeline" aria-label="Event timeline" ref={table}>
      <thead>
        <tr>
          <th>seq</th>
          <th>type</th>
          <th>event</th>
          {props.onFork && <th aria-label="actions" />}
        </tr>
      </thead>
      <tbody>
        {props.events.map((e) => (
          <Fragment key={e.seq}>
            <tr
              data-seq={e.seq}
              class={`${e.inherited ? 'inherited' : ''} ${e.synthetic ? 'synthetic' : ''} type-${e.type.replace(/\W/g, '-')}${e.seq === props.targetSeq ? ' target' : ''}`}
              aria-current={e.seq === props.targetSeq ? 'location' : undefined}
            >
              <td class="seq">{e.seq}</td>
              <td class="type">
                <button type="button" class="link" aria-expanded={open === e.seq} onClick={() => setOpen(open === e.seq ? null : e.seq)}>
                  {e.type}
                </button>
                {e.inherited && (
                  <Badge tone="inherited" title="Copied from the parent by the fork">
                    inherited
                  </Badge>
                )}
                {e.synthetic && (
                  <Badge tone="synthetic" title="Written by repair, not by a real actor">
                    synthetic
                  </Badge>
                )}
              </td>
              <td class="summary">{eventSummary(e)}</td>
              {props.onFork && (
                <td class="actions">
                  <button
                    type="button"
                    class="small fork-button"
                    disabled={props.busy}
                    aria-label={`Fork at event ${e.seq}`}
                    title={`Fork at this event: a new session with events 0–${e.seq}`}
                    onClick={() => props.onFork!(e.seq)}
                  >
                    Fork here
                  </button>
                </td>
              )}
            </tr>
            {open === e.seq && (
              <tr class="event-data">
                <td colSpan={props.onFork ? 4 : 3}>
                  <pre>{JSON.stringify({ id: e.id, createdAt: e.createdAt, data: e.data }, null, 2)}</pre>
                </td>
              </tr>
            )}
          </Fragment>
        ))}
      </tbody>
    </table>
  );
}
