// One session's state for the session page: its summary, its whole event log
// (loaded page by page, then followed live by sessionEvents) and the model
// text of the running step as it streams (sessionTurns TEXT_DELTA).
import { useEffect, useRef, useState } from 'preact/hooks';
import {
  DashboardSessionDocument,
  SessionEventsDocument,
  SessionEventsLiveDocument,
  SessionTurnsDocument,
  type DashboardSessionQuery,
  type EventFieldsFragment,
} from '../../generated/graphql.ts';
import { follow, forkline } from './api.ts';
import { errorText } from './widgets.tsx';

export type SessionDetails = NonNullable<DashboardSessionQuery['session']>;

export interface LiveStep {
  turn: number;
  step: number;
  text: string;
  /** Name of the tool running now, if any. */
  tool?: string;
}

const PAGE = 500;

/** Events after `afterSeq`, every page. */
export async function loadEvents(id: string, afterSeq = -1): Promise<EventFieldsFragment[]> {
  const events: EventFieldsFragment[] = [];
  for (;;) {
    const r = await forkline.query(SessionEventsDocument, { id, afterSeq, first: PAGE });
    const page = r.session?.events.edges.map((e) => e.node) ?? [];
    events.push(...page);
    if (!r.session?.events.pageInfo.hasNextPage || !page.length) return events;
    afterSeq = page[page.length - 1].seq;
  }
}

export function useSessionLog(id: string) {
  /** undefined while loading, null when the session does not exist. */
  const [session, setSession] = useState<SessionDetails | null | undefined>(undefined);
  const [events, setEvents] = useState<EventFieldsFragment[]>([]);
  const [live, setLive] = useState<LiveStep | null>(null);
  const [error, setError] = useState<string | null>(null);
  const log = useRef<EventFieldsFragment[]>([]);

  useEffect(() => {
    let closed = false;
    const stops: Array<() => void> = [];
    log.current = [];
    setSession(undefined);
    setEvents([]);
    setLive(null);
    setError(null);
    const answeredSteps = new Set<string>();

    let summaryTimer: ReturnType<typeof setTimeout> | undefined;
    const refreshSummary = () => {
      clearTimeout(summaryTimer);
      summaryTimer = setTimeout(async () => {
        try {
          const r = await forkline.query(DashboardSessionDocument, { id });
          if (!closed) setSession(r.session);
        } catch (err) {
          if (!closed) setError(errorText(err));
        }
      }, 80);
    };

    // Appends in seq order; a gap (missed delivery) is filled from the log.
    let filling = false;
    const append = async (incoming: EventFieldsFragment[]) => {
      const next = [...log.current];
      for (const e of incoming) {
        if (e.seq < next.length) continue;
        if (e.seq > next.length) {
          if (filling) return;
          filling = true;
          try {
            await append(await loadEvents(id, next.length - 1));
          } finally {
            filling = false;
          }
          return append(incoming);
        }
        next.push(e);
        if (e.type === 'model/message') {
          const d = e.data as { turn: number; step: number };
          answeredSteps.add(`${d.turn}:${d.step}`);
          setLive((l) => (l && l.turn === d.turn && l.step === d.step ? { ...l, text: '' } : l));
        }
      }
      if (closed || next.length === log.current.length) return;
      log.current = next;
      setEvents(next);
      refreshSummary();
    };

    (async () => {
      const [summary, initial] = await Promise.all([forkline.query(DashboardSessionDocument, { id }), loadEvents(id)]);
      if (closed) return;
      setSession(summary.session);
      if (!summary.session) return;
      log.current = initial;
      setEvents(initial);
      stops.push(
        // Resumes after the last seq held, so a reconnect loses nothing.
        follow(() => forkline.subscribe(SessionEventsLiveDocument, { sessionId: id, afterSeq: log.current.length - 1 }), {
          next: (r) => {
            setError(null);
            void append([r.sessionEvents]);
          },
          error: (err) => !closed && setError(`live events: ${errorText(err)}`),
          reconnecting: () => !closed && setError('live events: reconnecting…'),
          complete: refreshSummary, // the session was deleted: the page says so
        }),
        followLiveSteps(id, answeredSteps, setLive, refreshSummary, (err) => !closed && setError(`live output: ${errorText(err)}`)),
      );
    })().catch((err) => !closed && setError(errorText(err)));

    return () => {
      closed = true;
      clearTimeout(summaryTimer);
      for (const stop of stops) stop();
    };
  }, [id]);

  return { session, events, live, error, setSession };
}

/**
 * The running step's streamed text and tool (sessionTurns), until its
 * model/message is stored (then `answeredSteps` holds it and the log shows it).
 */
export function followLiveSteps(
  id: string,
  answeredSteps: Set<string>,
  setLive: (update: (l: LiveStep | null) => LiveStep | null) => void,
  onTurnBoundary: () => void,
  onError: (err: unknown) => void,
): () => void {
  return follow(() => forkline.subscribe(SessionTurnsDocument, { sessionId: id }), {
    next: ({ sessionTurns: u }) => {
      const step = u.step ?? 0;
      switch (u.kind) {
        case 'STEP_STARTED':
          setLive(() => ({ turn: u.turn, step, text: '' }));
          break;
        case 'TEXT_DELTA':
          if (answeredSteps.has(`${u.turn}:${step}`)) break;
          setLive((l) =>
            l && l.turn === u.turn && l.step === step ? { ...l, text: l.text + (u.text ?? '') } : { turn: u.turn, step, text: u.text ?? '' },
          );
          break;
        case 'TOOL_RUNNING':
          setLive((l) => ({ turn: u.turn, step, text: l?.text ?? '', tool: u.toolName ?? 'tool' }));
          break;
        case 'TOOL_FINISHED':
          setLive((l) => (l ? { ...l, tool: undefined } : l));
          break;
        case 'TURN_ENDED':
          setLive(() => null);
          onTurnBoundary();
          break;
        case 'TURN_STARTED':
          onTurnBoundary();
          break;
      }
    },
    error: onError,
  });
}
