// The projection of a sessionEvents selection (http/graphql/event-projection.ts)
// gives exactly what graphql-js gives executing the subscription on the event,
// and declines every selection it cannot mirror.
import { describe, expect, it } from 'vitest';
import {
  GraphQLNonNull,
  GraphQLObjectType,
  GraphQLString,
  Kind,
  execute,
  parse,
  type FieldNode,
  type FragmentDefinitionNode,
  type OperationDefinitionNode,
} from 'graphql';
import { schema } from '../../../src/graphql/schema.ts';
import { eventProjection } from '../../../src/http/graphql/event-projection.ts';
import type { StoredEvent } from '../../../src/store/session-log.ts';

function projectionOf(doc: string, returnType = schema.getSubscriptionType()!.getFields().sessionEvents.type) {
  const document = parse(doc);
  const op = document.definitions.find((d): d is OperationDefinitionNode => d.kind === Kind.OPERATION_DEFINITION)!;
  const field = op.selectionSet.selections[0] as FieldNode;
  const fragments = Object.fromEntries(
    document.definitions.filter((d): d is FragmentDefinitionNode => d.kind === Kind.FRAGMENT_DEFINITION).map((f) => [f.name.value, f]),
  );
  return {
    document,
    projection: eventProjection({
      fieldNodes: [field],
      fragments,
      returnType,
      path: { key: field.alias?.value ?? field.name.value, prev: undefined, typename: 'Subscription' },
    }),
  };
}

const events: StoredEvent[] = [
  {
    id: 'evt_abc_0',
    sessionId: 'ses_abc',
    seq: 0,
    type: 'session/title',
    data: { title: 'héllo "quoted" \u2028 ✓' },
    inherited: false,
    synthetic: false,
    createdAt: new Date('2026-11-30T08:55:01.120Z'),
  },
  {
    id: 'evt_abc_7',
    sessionId: 'ses_abc',
    seq: 7,
    type: 'tool/result',
    data: { callId: 'c', status: 'interrupted', output: null, nested: [1, { a: [] }] },
    inherited: true,
    synthetic: true,
    createdAt: new Date(0),
  },
];

describe('event projection', () => {
  it('gives what graphql-js gives, byte for byte', async () => {
    const selections = [
      'subscription { sessionEvents(sessionId: "s") { seq } }',
      'subscription { sessionEvents(sessionId: "s") { id seq type data inherited synthetic createdAt sessionId __typename } }',
      'subscription { e: sessionEvents(sessionId: "s") { n: seq t: type seq n2: seq } }',
      'subscription { sessionEvents(sessionId: "s") { ...F ... on Event { data seq } ... { createdAt } ... on Node { id } } } fragment F on Event { type seq ...G } fragment G on Event { synthetic }',
      'subscription S($id: ID!) { sessionEvents(sessionId: $id, afterSeq: 3) { __typename type } }',
    ];
    for (const doc of selections) {
      const { document, projection } = projectionOf(doc);
      expect(projection, doc).not.toBeNull();
      for (const event of events) {
        const executed = await execute({ schema, document, rootValue: event, variableValues: { id: 's' }, contextValue: {} });
        expect(projection!.payload(event), doc).toBe(JSON.stringify(executed));
      }
    }
  });

  it('equal selections share a key; different ones do not', () => {
    const a = projectionOf('subscription { sessionEvents(sessionId: "s") { seq type } }').projection!;
    const b = projectionOf('subscription { sessionEvents(sessionId: "t", afterSeq: 4) { seq ... { type } } }').projection!;
    const c = projectionOf('subscription { sessionEvents(sessionId: "s") { type seq } }').projection!;
    const d = projectionOf('subscription { x: sessionEvents(sessionId: "s") { seq type } }').projection!;
    expect(a.key).toBe(b.key);
    expect(a.key).not.toBe(c.key); // key order is output order
    expect(a.key).not.toBe(d.key);
  });

  it('declines what it cannot mirror: directives, unknown fields, foreign fragments', () => {
    for (const doc of [
      'subscription($x: Boolean!) { sessionEvents(sessionId: "s") { seq @include(if: $x) } }',
      'subscription($x: Boolean!) { sessionEvents(sessionId: "s") @skip(if: $x) { seq } }',
      'subscription { sessionEvents(sessionId: "s") { ... on Session { title } } }',
      'subscription { sessionEvents(sessionId: "s") { seq nope } }',
      'subscription { sessionEvents(sessionId: "s") { ...F } } fragment F on Session { id }',
    ])
      expect(projectionOf(doc).projection, doc).toBeNull();
  });

  it("takes Event's fields from the schema: a new field is projected, one with its own resolver is executed", () => {
    const Event = new GraphQLObjectType({
      name: 'Event',
      fields: {
        seq: { type: new GraphQLNonNull(GraphQLString) },
        kind: { type: new GraphQLNonNull(GraphQLString) }, // a new field, read from the event as graphql-js reads it
        shout: { type: new GraphQLNonNull(GraphQLString), resolve: (e: StoredEvent) => e.type.toUpperCase() },
        maybe: { type: GraphQLString },
      },
    });
    const returnType = new GraphQLNonNull(Event);
    const event = { ...events[0], kind: 'k' } as StoredEvent;
    const projected = projectionOf('subscription { sessionEvents(sessionId: "s") { seq kind __typename } }', returnType).projection;
    expect(projected!.payload(event)).toBe('{"data":{"sessionEvents":{"seq":"0","kind":"k","__typename":"Event"}}}');
    expect(projectionOf('subscription { sessionEvents(sessionId: "s") { seq shout } }', returnType).projection).toBeNull();
    // Nullable: graphql-js's null for a missing value is not mirrored; executed as usual.
    expect(projectionOf('subscription { sessionEvents(sessionId: "s") { maybe } }', returnType).projection).toBeNull();
  });
});
