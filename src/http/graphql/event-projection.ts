// A sessionEvents subscription's selection as a plain function of the event:
// what graphql-js would produce executing it on that event, without executing
// anything. Subscribers with the same selection share one serialised payload
// per event (ws-delivery.ts).
//
// The fields come from the schema, not from a list of our own: the field's
// return type (Event) names the fields, the fragment type conditions (Event
// and its interfaces) and each field's scalar; a value is read as graphql-js
// reads it (the default resolver) and serialised by that scalar. So a field
// added to Event is projected with it, and a field whose value needs its own
// resolver (or arguments, or a selection of its own) makes the selection be
// executed as usual. Directives decline too. tests/http/graphql/event-projection.test.ts
// and tests/subscriptions/projected-events.test.ts hold this to graphql-js's
// output, byte for byte, for every event type.
import {
  Kind,
  defaultFieldResolver,
  getNamedType,
  isLeafType,
  isNonNullType,
  isObjectType,
  type FieldNode,
  type FragmentDefinitionNode,
  type GraphQLLeafType,
  type GraphQLObjectType,
  type GraphQLResolveInfo,
  type SelectionSetNode,
} from 'graphql';
import type { StoredEvent } from '../../store/session-log.ts';

export interface EventProjection {
  /** Same key, same payload: subscribers with equal keys share payloads. */
  key: string;
  /** The execution result of the subscription for this event, as JSON text. */
  payload(event: StoredEvent): string;
  /**
   * The payload when it is at most `maxBytes` (UTF-8), else its size: measured
   * before it is joined, so a selection that names a large field under many
   * aliases never builds the text it would refuse.
   */
  payloadWithin(event: StoredEvent, maxBytes: number): string | { over: number };
}

/** How one response key's value is made from the event. */
type Read = (event: StoredEvent) => unknown;

/** A field of `type` graphql-js would resolve by reading the property and serialising a scalar; null when it needs more. */
function readerOf(type: GraphQLObjectType, field: FieldNode): Read | null {
  const name = field.name.value;
  if (name === '__typename') return () => type.name;
  const def = type.getFields()[name];
  if (!def || def.resolve || def.args.length || field.arguments?.length || field.selectionSet) return null;
  const leaf = getNamedType(def.type);
  // Non-null only: a null where graphql-js would raise a field error is not mirrored.
  if (!isLeafType(leaf) || !isNonNullType(def.type)) return null;
  const scalar: GraphQLLeafType = leaf;
  const info = { fieldName: name } as GraphQLResolveInfo; // all the default resolver reads
  return (event) => scalar.serialize(defaultFieldResolver(event, {}, undefined, info));
}

/** Response keys and their readers, in graphql-js's order; false when it is not a plain selection of `type`. */
function collect(
  type: GraphQLObjectType,
  conditions: ReadonlySet<string>,
  set: SelectionSetNode,
  fragments: Record<string, FragmentDefinitionNode>,
  out: Map<string, { name: string; read: Read }>,
  seen: Set<string>,
): boolean {
  for (const s of set.selections) {
    if (s.directives?.length) return false;
    if (s.kind === Kind.FIELD) {
      const read = readerOf(type, s);
      if (!read) return false;
      const key = s.alias?.value ?? s.name.value;
      if (!out.has(key)) out.set(key, { name: s.name.value, read });
    } else if (s.kind === Kind.INLINE_FRAGMENT) {
      if (s.typeCondition && !conditions.has(s.typeCondition.name.value)) return false;
      if (!collect(type, conditions, s.selectionSet, fragments, out, seen)) return false;
    } else {
      const f = fragments[s.name.value];
      if (!f || !conditions.has(f.typeCondition.name.value) || f.directives?.length) return false;
      if (seen.has(s.name.value)) continue;
      seen.add(s.name.value);
      if (!collect(type, conditions, f.selectionSet, fragments, out, seen)) return false;
    }
  }
  return true;
}

/** The projection of the sessionEvents field being resolved, or null to execute it as usual. */
export function eventProjection(info: Pick<GraphQLResolveInfo, 'fieldNodes' | 'fragments' | 'path' | 'returnType'>): EventProjection | null {
  if (info.fieldNodes.length !== 1 || !isNonNullType(info.returnType)) return null;
  const type = info.returnType.ofType;
  if (!isObjectType(type)) return null;
  const field = info.fieldNodes[0];
  if (!field.selectionSet || field.directives?.length) return null;
  const conditions = new Set([type.name, ...type.getInterfaces().map((i) => i.name)]);
  const keys = new Map<string, { name: string; read: Read }>();
  if (!collect(type, conditions, field.selectionSet, info.fragments, keys, new Set())) return null;
  const rootKey = String(info.path.key);
  // Each field's JSON text is made once however many aliases name it; the
  // payload is those texts joined as JSON.stringify would join the object.
  const fields = [...new Set([...keys.values()].map((k) => k.name))];
  const reads = new Map([...keys.values()].map((k) => [k.name, k.read]));
  const head = `{"data":{${JSON.stringify(rootKey)}:{`;
  const members = [...keys].map(([key, { name }]) => ({ prefix: `${JSON.stringify(key)}:`, field: fields.indexOf(name) }));
  const join = (texts: string[]) => `${head}${members.map((m) => m.prefix + texts[m.field]).join(',')}}}}`;
  const textsOf = (event: StoredEvent) => fields.map((name) => JSON.stringify(reads.get(name)!(event)));
  return {
    key: JSON.stringify([rootKey, ...[...keys].map(([key, { name }]) => [key, name])]),
    payload: (event) => join(textsOf(event)),
    payloadWithin(event, maxBytes) {
      const texts = textsOf(event);
      const sizes = texts.map((t) => Buffer.byteLength(t));
      let bytes = Buffer.byteLength(head) + 3 + members.length - 1;
      for (const m of members) bytes += Buffer.byteLength(m.prefix) + sizes[m.field];
      return bytes > maxBytes ? { over: bytes } : join(texts);
    },
  };
}
