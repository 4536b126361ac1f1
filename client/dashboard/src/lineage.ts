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
export function lineageForest(
  sessions: Iterable<SessionSummaryFragment>,
  search = '',
  /** `keep`: only these sessions match (a filter; their ancestors stay for context). `order`: siblings at every level in this order instead. */
  opts: { keep?: (s: SessionSummaryFragment) => boolean; order?: (a: SessionSummaryFragment, b: SessionSummaryFragment) => number } = {},
): LineageNode[] {
  const nodes = new Map<string, LineageNode>();
  for (const s of sessions) nodes.set(s.id, { session: s, children: [], matched: false });
  const roots: LineageNode[] = [];
  for (const node of nodes.values()) {
    const parent = node.session.parent && nodes.get(node.session.parent.id);
    (parent ? parent.children : roots).push(node);
  }
  const byCreated = (dir: 1 | -1) => (a: LineageNode, b: LineageNode) =>
    dir * (a.session.createdAt.localeCompare(b.session.createdAt) || a.session.id.localeCompare(b.session.id));
  const order = opts.order;
  const ordered = order && ((a: LineageNode, b: LineageNode) => order(a.session, b.session) || a.session.id.localeCompare(b.session.id));
  for (const node of nodes.values()) node.children.sort(ordered ?? byCreated(1));
  roots.sort(ordered ?? byCreated(-1));

  const needle = search.trim().toLowerCase();
  const keep = opts.keep;
  if (!needle && !keep) {
    for (const node of nodes.values()) node.matched = true;
    return roots;
  }
  // Keeps a node when it or a descendant matches.
  const prune = (list: LineageNode[]): LineageNode[] =>
    list.flatMap((node) => {
      node.matched = (node.session.title ?? '').toLowerCase().includes(needle) && (!keep || keep(node.session));
      node.children = prune(node.children);
      return node.matched || node.children.length ? [node] : [];
    });
  return prune(roots);
}

/**
 * What tells a fork apart from its parent in the list: its title without the
 * parent's title it starts with (and the separator after it), so that
 * "Plan · variant 3" under "Plan" reads "variant 3"; the whole title when it
 * does not start with the parent's, `fork @N` when nothing is left.
 */
export function distinctTitle(title: string, parentTitle: string | null | undefined, forkedAtSeq: number | null | undefined): string {
  const parent = (parentTitle ?? '').trim();
  if (!parent || !title.startsWith(parent)) return title;
  const rest = title
    .slice(parent.length)
    .replace(/^[\s·:\-–—|/]+/, '')
    .trim();
  return rest || (forkedAtSeq == null ? title : `fork @${forkedAtSeq}`);
}
