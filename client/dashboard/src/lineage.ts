// The sessions list as a lineage forest (parent → children) with title search.
import type { SessionSummaryFragment } from '../../generated/graphql.ts';

export interface LineageNode {
  session: SessionSummaryFragment;
  children: LineageNode[];
  /** The title matched the search (ancestors of matches are kept for context). */
  matched: boolean;
}

/**
 * Roots are sessions without a parent (or whose parent is not listed), newest
 * first; children follow their fork order (oldest first). A search keeps the
 * matching sessions and the ancestors that lead to them.
 */
export function lineageForest(sessions: Iterable<SessionSummaryFragment>, search = ''): LineageNode[] {
  const nodes = new Map<string, LineageNode>();
  for (const s of sessions) nodes.set(s.id, { session: s, children: [], matched: false });
  const roots: LineageNode[] = [];
  for (const node of nodes.values()) {
    const parent = node.session.parent && nodes.get(node.session.parent.id);
    (parent ? parent.children : roots).push(node);
  }
  const byCreated = (dir: 1 | -1) => (a: LineageNode, b: LineageNode) =>
    dir * (a.session.createdAt.localeCompare(b.session.createdAt) || a.session.id.localeCompare(b.session.id));
  for (const node of nodes.values()) node.children.sort(byCreated(1));
  roots.sort(byCreated(-1));

  const needle = search.trim().toLowerCase();
  if (!needle) {
    for (const node of nodes.values()) node.matched = true;
    return roots;
  }
  // Keeps a node when it or a descendant matches.
  const prune = (list: LineageNode[]): LineageNode[] =>
    list.flatMap((node) => {
      node.matched = (node.session.title ?? '').toLowerCase().includes(needle);
      node.children = prune(node.children);
      return node.matched || node.children.length ? [node] : [];
    });
  return prune(roots);
}
