// A sessionEvents subscription's selection as a plain function of the event:
// what graphql-js would produce executing it on that event, without executing
// anything. Subscribers with the same selection share one serialised payload
// per event (ws-delivery.ts). Only selections of Event's own scalar
// fields qualify (any aliases and fragments, no directives); anything else is
// executed as usual. tests/http/graphql/event-projection.test.ts holds this to
// graphql-js's output.
import { Kind, type FieldNode, type FragmentDefinitionNode, type GraphQLResolveInfo, type SelectionSetNode } from 'graphql';
import type { StoredEvent } from '../../store/session-log.ts';

const FIELDS: Record<string, (e: StoredEvent) => unknown> = {
  __typename: () => 'Event',
  id: (e) => e.id,
  seq: (e) => e.seq,
  type: (e) => e.type,
  data: (e) => e.data,
  inherited: (e) => e.inherited,
  synthetic: (e) => e.synthetic,
  createdAt: (e) => e.createdAt.toISOString(),
  sessionId: (e) => e.sessionId,
};
/** Type conditions a fragment on an Event field can carry. */
const EVENT_TYPES = new Set(['Event', 'Node']);

export interface EventProjection {
  /** Same key, same payload: subscribers with equal keys share payloads. */
  key: string;
  /** The execution result of the subscription for this event, as JSON text. */
  payload(event: StoredEvent): string;
}

/** Response keys and fields of a selection, in graphql-js's order; null when it is not a plain Event selection. */
function collect(set: SelectionSetNode, fragments: Record<string, FragmentDefinitionNode>, out: Map<string, string>, seen: Set<string>): boolean {
  for (const s of set.selections) {
    if (s.directives?.length) return false;
    if (s.kind === Kind.FIELD) {
      if (!(s.name.value in FIELDS) || s.selectionSet || s.arguments?.length) return false;
      const key = (s as FieldNode).alias?.value ?? s.name.value;
      if (!out.has(key)) out.set(key, s.name.value);
    } else if (s.kind === Kind.INLINE_FRAGMENT) {
      if (s.typeCondition && !EVENT_TYPES.has(s.typeCondition.name.value)) return false;
      if (!collect(s.selectionSet, fragments, out, seen)) return false;
    } else {
      const f = fragments[s.name.value];
      if (!f || !EVENT_TYPES.has(f.typeCondition.name.value) || f.directives?.length) return false;
      if (seen.has(s.name.value)) continue;
      seen.add(s.name.value);
      if (!collect(f.selectionSet, fragments, out, seen)) return false;
    }
  }
  return true;
}

/** The projection of the sessionEvents field being resolved, or null to execute it as usual. */
export function eventProjection(info: Pick<GraphQLResolveInfo, 'fieldNodes' | 'fragments' | 'path'>): EventProjection | null {
  if (info.fieldNodes.length !== 1) return null;
  const field = info.fieldNodes[0];
  if (!field.selectionSet || field.directives?.length) return null;
  const keys = new Map<string, string>();
  if (!collect(field.selectionSet, info.fragments, keys, new Set())) return null;
  const rootKey = String(info.path.key);
  const entries = [...keys].map(([key, name]) => [key, FIELDS[name]] as const);
  return {
    key: JSON.stringify([rootKey, ...keys]),
    payload(event) {
      const node: Record<string, unknown> = {};
      for (const [key, read] of entries) node[key] = read(event);
      return JSON.stringify({ data: { [rootKey]: node } });
    },
  };
}
