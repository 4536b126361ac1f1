// Parent and child side by side from the fork's cut: the shared cut event,
// then what each log holds after it (the parent's later history on the left,
// the child's marker, closers and own turns on the right).
import { useMemo } from 'preact/hooks';
import { eventSummary, foldConversation, itemsAfter, type LogEvent } from './conversation.ts';
import { ConversationView } from './conversation-view.tsx';
import { onLinkClick, sessionPath } from './router.ts';
import { useSessionLog, type LiveStep, type SessionDetails } from './session-log.ts';
import { Timeline } from './timeline.tsx';
import { useSessionTitles } from './session-titles.ts';

export function ComparePage({ id }: { id: string }) {
  const child = useSessionLog(id);
  const parentId = child.session?.parent?.id;
  if (child.session === undefined) return <main class="compare-page loading">Loading…</main>;
  if (!child.session || !parentId)
    return (
      <main class="compare-page">
        <p class="error">Session {id} has no parent to compare with.</p>
      </main>
    );
  return <CompareLoaded child={child} parentId={parentId} />;
}

function CompareLoaded({ child, parentId }: { child: ReturnType<typeof useSessionLog>; parentId: string }) {
  const parent = useSessionLog(parentId);
  const session = child.session!;
  const cut = session.forkedAtSeq ?? -1;
  const cutEvent = child.events.find((e) => e.seq === cut);
  return (
    <main class="compare-page" data-session-id={session.id}>
      <header class="session-head">
        <div class="session-title">
          <h1>Compare with parent</h1>
          <div class="meta">
            cut at event {cut} · the first {session.inheritedEventCount} events are shared
            {cutEvent && (
              <span class="muted">
                {' '}
                · #{cut} {cutEvent.type}: {eventSummary(cutEvent)}
              </span>
            )}
          </div>
        </div>
        <div class="head-actions">
          <a class="button" href={sessionPath(session.id)} onClick={onLinkClick}>
            Back to session
          </a>
        </div>
      </header>
      <div class="panes compare">
        <Side label="Parent" session={parent.session} events={parent.events} live={parent.live} cut={cut} testId="compare-parent" />
        <Side
          label="Child"
          session={session}
          events={child.events}
          live={child.live}
          cut={cut}
          testId="compare-child"
        />
      </div>
    </main>
  );
}

function Side(props: {
  label: string;
  session: SessionDetails | null | undefined;
  events: LogEvent[];
  live: LiveStep | null;
  cut: number;
  testId: string;
}) {
  const items = useMemo(() => itemsAfter(foldConversation(props.events), props.cut), [props.events, props.cut]);
  const titleOf = useSessionTitles(items.flatMap((i) => (i.kind === 'fork-marker' ? [i.parentSessionId] : [])));
  const after = useMemo(() => props.events.filter((e) => e.seq >= props.cut), [props.events, props.cut]);
  const s = props.session;
  return (
    <section class="pane" aria-label={`${props.label} from the cut`} data-testid={props.testId}>
      <h2>
        {props.label}:{' '}
        {s ? (
          <a href={sessionPath(s.id)} onClick={onLinkClick}>
            {s.title || s.id}
          </a>
        ) : (
          '…'
        )}{' '}
        <span class="muted">{s && `${s.eventCount} events`}</span>
      </h2>
      <div class="scroll">
        {items.length ? <ConversationView items={items} live={props.live} titleOf={titleOf} /> : <p class="muted">Nothing after the cut.</p>}
        <h3>Events from #{props.cut}</h3>
        <Timeline events={after} />
      </div>
    </section>
  );
}
