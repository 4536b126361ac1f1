// A session's fork family as a tree (Session.family: the root and every fork
// below it, any depth): each node with the event of its parent it was forked
// at, its status and size; siblings forked at the same event are grouped under
// that event, linking to them side by side (fork-point-page.tsx). Live: a new
// fork or an append anywhere in the tree re-reads it.
import { DashboardFamilyDocument, type SessionSummaryFragment } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { lineageForest, type LineageNode } from './lineage.ts';
import { LivePageHead, pendingPage, useLiveQuery } from './live-query.tsx';
import { forkPointPath, sessionPath } from './router.ts';
import { StatusBadge } from './widgets.tsx';
import './fork-family.css';
import { visibleText } from '../../../src/core/visible-text.ts';

/** Children grouped by the parent's seq they were forked at, in seq order. */
export function byForkSeq(children: readonly LineageNode[]): Array<{ seq: number; nodes: LineageNode[] }> {
  const groups = new Map<number, LineageNode[]>();
  for (const c of children) {
    const seq = c.session.forkedAtSeq ?? -1;
    groups.set(seq, [...(groups.get(seq) ?? []), c]);
  }
  return [...groups].sort(([a], [b]) => a - b).map(([seq, nodes]) => ({ seq, nodes }));
}

export function FamilyPage({ id }: { id: string }) {
  const { value: family, error } = useLiveQuery(
    `family:${id}`,
    id,
    async () => {
      const r = await forkline.query(DashboardFamilyDocument, { id });
      return r.session ? { sessions: r.session.family.edges.map((e) => e.node), truncated: r.session.family.pageInfo.hasNextPage } : null;
    },
    (s, last) => !!last && (last.sessions.some((m) => m.id === s.id) || (!!s.parent && last.sessions.some((m) => m.id === s.parent!.id))),
  );
  const pending = pendingPage('family-page', id, family, error);
  if (pending || !family) return pending;
  const roots = lineageForest(family.sessions);
  const self = family.sessions.find((s) => s.id === id);
  return (
    <main id="main" tabIndex={-1} class="family-page" data-session-id={id}>
      <LivePageHead title="Fork tree" error={error}>
        {family.sessions.length} sessions in the tree of <a href={sessionPath(id)}>{visibleText(self?.title || id)}</a>
        {family.truncated && ' (the first 200 shown)'}
      </LivePageHead>
      <nav class="family-tree" aria-label="Fork tree">
        <ul>
          {roots.map((node) => (
            <FamilyNode key={node.session.id} node={node} currentId={id} />
          ))}
        </ul>
      </nav>
    </main>
  );
}

function FamilyNode({ node, currentId }: { node: LineageNode; currentId: string }) {
  const s = node.session;
  return (
    <li class="family-node" data-session-id={s.id}>
      <NodeLine session={s} current={s.id === currentId} />
      {node.children.length > 0 && (
        <ul>
          {byForkSeq(node.children).map(({ seq, nodes }) => (
            <li key={seq} class="family-fork-point" data-fork-seq={seq}>
              <a class="fork-point-link" href={forkPointPath(s.id, seq)} title={`The children forked at event ${seq}, side by side`}>
                @{seq} · {nodes.length} {nodes.length === 1 ? 'fork' : 'forks'}
              </a>
              <ul>
                {nodes.map((child) => (
                  <FamilyNode key={child.session.id} node={child} currentId={currentId} />
                ))}
              </ul>
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

function NodeLine({ session: s, current }: { session: SessionSummaryFragment; current: boolean }) {
  return (
    <div class={`family-line${current ? ' current' : ''}`}>
      <a href={sessionPath(s.id)} aria-current={current ? 'page' : undefined} class="family-title">
        {visibleText(s.title || 'Untitled')}
      </a>
      <span class="family-meta">
        <StatusBadge status={s.status} failed={s.lastTurnFailed} />
        <span>
          {s.eventCount} ev · {s.turnCount} t
        </span>
      </span>
    </div>
  );
}
