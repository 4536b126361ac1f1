// What a field's selection asks for, through fragments: the hot reads read
// what their selection needs and no more (session-columns.ts: a Session's
// columns; events-connection.ts: whether an events page reads its data).
import { Kind, type FragmentDefinitionNode, type GraphQLResolveInfo, type SelectionSetNode } from 'graphql';

type SelectionInfo = Pick<GraphQLResolveInfo, 'fieldNodes' | 'fragments'>;

/**
 * `fn` of a field's selection, computed once per document: the compiled query
 * (plugins/jit.ts) hands every request the same `fieldNodes`, so a hot page
 * does not walk its selection again on each request (or, for `parent`, on
 * each row). Other executors pass new arrays: computed each time, as before.
 */
export function perSelection<T>(fn: (info: SelectionInfo) => T): (info: SelectionInfo) => T {
  const known = new WeakMap<SelectionInfo['fieldNodes'], T>();
  return (info) => {
    // One look-up per call (`parent`'s runs once per row of a page); a second only for a value of undefined.
    const kept = known.get(info.fieldNodes);
    if (kept !== undefined || known.has(info.fieldNodes)) return kept as T;
    const value = fn(info);
    known.set(info.fieldNodes, value);
    return value;
  };
}

export type Fragments = Record<string, FragmentDefinitionNode>;

/** Field names selected in a selection set, through fragments (conditions are ignored: more columns, never fewer). */
export function fieldNames(set: SelectionSetNode | undefined, fragments: Fragments, out: Set<string>, seen = new Set<string>()): Set<string> {
  for (const s of set?.selections ?? []) {
    if (s.kind === Kind.FIELD) out.add(s.name.value);
    else if (s.kind === Kind.INLINE_FRAGMENT) fieldNames(s.selectionSet, fragments, out, seen);
    else if (!seen.has(s.name.value)) {
      seen.add(s.name.value);
      fieldNames(fragments[s.name.value]?.selectionSet, fragments, out, seen);
    }
  }
  return out;
}

/** Sub-selections of the fields named `name` in a selection set, through fragments. */
export function subSelections(
  set: SelectionSetNode | undefined,
  name: string,
  fragments: Fragments,
  out: SelectionSetNode[] = [],
  seen = new Set<string>(),
): SelectionSetNode[] {
  for (const s of set?.selections ?? []) {
    if (s.kind === Kind.FIELD) {
      if (s.name.value === name && s.selectionSet) out.push(s.selectionSet);
    } else if (s.kind === Kind.INLINE_FRAGMENT) subSelections(s.selectionSet, name, fragments, out, seen);
    else if (!seen.has(s.name.value)) {
      seen.add(s.name.value);
      subSelections(fragments[s.name.value]?.selectionSet, name, fragments, out, seen);
    }
  }
  return out;
}
