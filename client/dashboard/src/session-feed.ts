// One session for the session page: its summary, the pages of its log the
// panes ask for (EventPages, nothing up front), the live appends after the
// length it opened at, the streaming step, and its status as the log says it
// (turn/start and turn/end as they arrive, so the header moves with the rows)
// and its queued inputs (inbox/add and inbox/remove as they arrive).
import { useEffect, useState } from 'preact/hooks';
import {
  DashboardSessionDocument,
  SessionEventsDocument,
  SessionEventsLiveDocument,
  SessionsChangedDocument,
  type SessionEventsLiveSubscription,
} from '../../generated/graphql.ts';
import { follow, followListening, forkline, problemOf, serverBack, type Sink } from './api.ts';
import { EventPages, isFinalPage } from './event-pages.ts';
import { followLiveSteps, type LiveStep, type SessionDetails } from './session-log.ts';
import { errorText } from './widgets.tsx';

/**
 * A session's log as EventPages (`length`: its eventCount when opened): pages
 * wholly in its past from GET /sessions/<id>/events, which the browser's HTTP
 * cache keeps (they never change); the page at the head through the events connection.
 */
export const sessionEventPages = (id: string, length: number) =>
  new EventPages(async (afterSeq, first, known) => {
    if (isFinalPage(afterSeq, first, known)) {
      const page = await forkline.eventPage(id, { after: afterSeq, first });
      return { events: page.edges.map((e) => e.node), eventCount: known };
    }
    const r = await forkline.query(SessionEventsDocument, { id, afterSeq, first });
    return { events: r.session?.events.edges.map((e) => e.node) ?? [], eventCount: r.session?.eventCount ?? 0 };
  }, length);

type LiveEvent = SessionEventsLiveSubscription['sessionEvents'];

/**
 * The session's appends after the end of `pages`, as they are stored, into
 * `pages` (after `sink.next` sees each); a reconnect resumes after the last
 * seq received.
 */
export function followAppends(sessionId: string, pages: EventPages, sink: Partial<Sink<LiveEvent>> = {}): () => void {
  let last = pages.length - 1;
  return follow(() => forkline.subscribe(SessionEventsLiveDocument, { sessionId, afterSeq: last }), {
    ...sink,
    next: ({ sessionEvents: e }) => {
      last = Math.max(last, e.seq);
      sink.next?.(e);
      pages.add([e]);
    },
  });
}

export interface SessionFeed {
  /** undefined while loading, null when the session does not exist. */
  session: SessionDetails | null | undefined;
  pages: EventPages | null;
  /** EventPages.version as last rendered: a new value means new events. */
  version: number;
  live: LiveStep | null;
  /** RUNNING/WAITING/IDLE from the last turn bracket or approval event seen live, else the summary's. */
  status: string | undefined;
  /**
   * Inputs waiting in the inbox: the summary's when the page opened, then
   * each inbox event as it arrives (the summary refreshes later, so a count
   * taken from it would say "queued" for a moment after the turn took it).
   */
  queued: number;
  error: string | null;
  /** How many times the live feed came back after a lost connection (a server restart): stale banners clear on a change. */
  resumed: number;
}

export function useSessionFeed(id: string): SessionFeed {
  const [session, setSession] = useState<SessionDetails | null | undefined>(undefined);
  const [pages, setPages] = useState<EventPages | null>(null);
  const [version, setVersion] = useState(0);
  const [live, setLive] = useState<LiveStep | null>(null);
  const [logStatus, setLogStatus] = useState<string | undefined>(undefined);
  const [queued, setQueued] = useState<ReadonlySet<string>>(new Set());
  const [error, setError] = useState<string | null>(null);
  const [resumed, setResumed] = useState(0);

  useEffect(() => {
    let closed = false;
    const stops: Array<() => void> = [];
    setSession(undefined);
    setPages(null);
    setLive(null);
    setLogStatus(undefined);
    setQueued(new Set());
    setError(null);
    const answeredSteps = new Set<string>();

    let summaryTimer: ReturnType<typeof setTimeout> | undefined;
    const refreshSummary = () => {
      clearTimeout(summaryTimer);
      summaryTimer = setTimeout(async () => {
        try {
          const r = await forkline.query(DashboardSessionDocument, { id, withInputs: false });
          if (!closed) setSession(r.session);
        } catch (err) {
          if (!closed) setError(errorText(err));
        }
      }, 80);
    };

    const open = async () => {
      const summary = await forkline.query(DashboardSessionDocument, { id, withInputs: true });
      if (closed) return;
      if (!summary.session) return setSession(null);
      const log = sessionEventPages(id, summary.session.eventCount);
      stops.push(log.subscribe(() => !closed && setVersion(log.version)));
      setSession(summary.session);
      setQueued(new Set(summary.session.pendingInputs?.map((p) => p.inputId)));
      setPages(log);
      // Live from the length the page opened at.
      stops.push(
        followAppends(id, log, {
          next: (e) => {
            setError(null);
            if (e.type === 'model/message') {
              const d = e.data as { turn: number; step: number };
              answeredSteps.add(`${d.turn}:${d.step}`);
              setLive((l) => (l && l.turn === d.turn && l.step === d.step ? { ...l, text: '' } : l));
            }
            if (e.type === 'turn/start') setLogStatus('RUNNING');
            // A call awaiting approval stops the turn until its decision (docs/contract.md#tool-approval).
            if (e.type === 'tool/approval-request') setLogStatus('WAITING');
            if (e.type === 'tool/approval') setLogStatus('RUNNING');
            if (e.type === 'turn/end') {
              setLogStatus('IDLE');
              setLive(null); // however it ended (interrupted by a restart too), nothing streams any more
            }
            if (e.type === 'inbox/add' || e.type === 'inbox/remove') {
              const inputId = (e.data as { inputId: string }).inputId;
              setQueued((q) => {
                const next = new Set(q);
                if (e.type === 'inbox/add') next.add(inputId);
                else next.delete(inputId);
                return next;
              });
            }
            refreshSummary();
          },
          error: (err) => !closed && setError(`live events: ${errorText(err)}`),
          reconnecting: () => !closed && setError('live events: reconnecting…'),
          // Back after a lost connection: the events since the last seq seen arrive through this
          // subscription (a turn the restart interrupted ends in them); what streamed before is gone.
          resumed: () => {
            if (closed) return;
            setError(null);
            setLive(null);
            setResumed((n) => n + 1);
            refreshSummary();
          },
          complete: refreshSummary, // the session was deleted: the page says so
        }),
        followLiveSteps(id, answeredSteps, setLive, refreshSummary, (err) => !closed && setError(`live output: ${errorText(err)}`)),
        // A new or renamed child changes no event of this log: the header's "children:" line follows
        // sessionsChanged. It starts with this session's row, sent once the server listens: a child made
        // between the summary's read and then is read with the summary again (docs/api.md, sessionsChanged).
        followListening(() => forkline.subscribe(SessionsChangedDocument, { startWith: [id] }), {
          first: refreshSummary,
          next: ({ sessionsChanged: s }) => {
            if (s.parent?.id === id) refreshSummary();
          },
        }),
      );
    };
    // The first read failed because the server is away: read again once it answers, without a reload.
    void (async () => {
      for (;;) {
        try {
          return await open();
        } catch (err) {
          if (closed) return;
          setError(errorText(err));
          if (problemOf(err)?.kind !== 'unreachable') return;
          await serverBack(() => closed);
          if (closed) return;
          setError(null);
        }
      }
    })();

    return () => {
      closed = true;
      clearTimeout(summaryTimer);
      for (const stop of stops) stop();
    };
  }, [id]);

  return { session, pages, version, live, status: logStatus ?? session?.status, queued: queued.size, error, resumed };
}
