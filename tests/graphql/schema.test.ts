import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { buildSchema, isNonNullType, type GraphQLField, type GraphQLObjectType } from 'graphql';
import { printedSchema, SCHEMA_FILE } from '../../src/graphql/print-schema.ts';

/**
 * The contract of docs/contract.md#graphql-names: for each field, its type, and the arguments the
 * contract names with their types. Names are fixed; more fields and more
 * optional arguments are welcome (a client of the contract still works).
 */
const CONTRACT: Record<string, Record<string, { type: string; args?: Record<string, string> }>> = {
  Query: {
    session: { type: 'Session', args: { id: 'ID!' } },
    sessions: { type: 'SessionConnection!', args: { first: 'Int', after: 'String', parentId: 'ID', status: 'SessionStatus' } },
    node: { type: 'Node', args: { id: 'ID!' } },
  },
  Session: {
    id: { type: 'ID!' },
    title: { type: 'String' },
    status: { type: 'SessionStatus!' },
    formatVersion: { type: 'Int!' },
    createdAt: { type: 'DateTime!' },
    updatedAt: { type: 'DateTime!' },
    eventCount: { type: 'Int!' },
    turnCount: { type: 'Int!' },
    parent: { type: 'Session' },
    forkedAtSeq: { type: 'Int' },
    inheritedEventCount: { type: 'Int!' },
    firstLiveSeq: { type: 'Int!' },
    children: { type: 'SessionConnection!', args: { first: 'Int', after: 'String' } },
    events: { type: 'EventConnection!', args: { afterSeq: 'Int', first: 'Int' } },
    turns: { type: '[Turn!]!' },
    pendingInputs: { type: '[PendingInput!]!' },
    recording: { type: 'String!' },
  },
  Event: {
    id: { type: 'ID!' },
    seq: { type: 'Int!' },
    type: { type: 'String!' },
    data: { type: 'JSON!' },
    inherited: { type: 'Boolean!' },
    synthetic: { type: 'Boolean!' },
    createdAt: { type: 'DateTime!' },
  },
  Mutation: {
    createSession: { type: 'Session!', args: { input: 'CreateSessionInput!' } },
    sendMessage: { type: 'SendMessagePayload!', args: { input: 'SendMessageInput!' } },
    forkSession: { type: 'ForkSessionPayload!', args: { input: 'ForkSessionInput!' } },
    branchSession: { type: 'ForkSessionPayload!', args: { input: 'BranchSessionInput!' } },
    cancelTurn: { type: 'Session!', args: { sessionId: 'ID!' } },
    importRecording: { type: 'Session!', args: { recording: 'String!' } },
    deleteSession: { type: 'DeleteSessionPayload!', args: { id: 'ID!', withDescendants: 'Boolean' } },
  },
  ForkSessionPayload: { session: { type: 'Session!' }, parent: { type: 'Session!' }, cutSeq: { type: 'Int!' }, syntheticEvents: { type: '[Event!]!' } },
  SendMessagePayload: { session: { type: 'Session!' }, inputId: { type: 'ID!' }, event: { type: 'Event!' } },
  DeleteSessionPayload: { deletedSessionIds: { type: '[ID!]!' } },
  Subscription: {
    sessionEvents: { type: 'Event!', args: { sessionId: 'ID!', afterSeq: 'Int' } },
    sessionTurns: { type: 'TurnUpdate!', args: { sessionId: 'ID!' } },
    sessionsChanged: { type: 'Session!' },
  },
};

describe('schema/schema.graphql', () => {
  it('is the printed Pothos schema (run `npm run print-schema` after changing src/graphql)', () => {
    expect(fs.readFileSync(SCHEMA_FILE, 'utf8')).toBe(printedSchema());
  });

  it('keeps the contract of docs/contract.md#graphql-names: names, types and arguments (extra arguments only optional)', () => {
    const schema = buildSchema(printedSchema());
    for (const [typeName, fields] of Object.entries(CONTRACT)) {
      const type = schema.getType(typeName) as GraphQLObjectType | undefined;
      expect(type, typeName).toBeDefined();
      for (const [fieldName, want] of Object.entries(fields)) {
        const field = type!.getFields()[fieldName] as GraphQLField<unknown, unknown> | undefined;
        expect(field, `${typeName}.${fieldName}`).toBeDefined();
        expect(String(field!.type), `${typeName}.${fieldName}`).toBe(want.type);
        const args = Object.fromEntries(field!.args.map((a) => [a.name, a]));
        for (const [argName, argType] of Object.entries(want.args ?? {})) {
          expect(String(args[argName]?.type), `${typeName}.${fieldName}(${argName})`).toBe(argType);
        }
        for (const extra of field!.args.filter((a) => !(a.name in (want.args ?? {})))) {
          expect(isNonNullType(extra.type) && extra.defaultValue === undefined, `${typeName}.${fieldName}(${extra.name}) must be optional`).toBe(false);
        }
      }
    }
    // The connection types by their contract names.
    for (const name of ['SessionConnection', 'EventConnection', 'Node']) expect(schema.getType(name), name).toBeDefined();
  });
});

describe('the executable schema', () => {
  it('reads node ids and connection fields as properties (no resolver: the query JIT inlines them)', async () => {
    const { schema } = await import('../../src/graphql/schema.ts');
    const fields = (type: string) => (schema.getType(type) as GraphQLObjectType).getFields();
    for (const type of ['Session', 'Event']) expect(fields(type).id.resolve, `${type}.id`).toBeUndefined();
    for (const type of ['SessionConnection', 'EventConnection', 'SearchHitConnection']) {
      expect(fields(type).edges.resolve, `${type}.edges`).toBeUndefined();
      expect(fields(type).pageInfo.resolve, `${type}.pageInfo`).toBeUndefined();
    }
    for (const type of ['SessionEdge', 'EventEdge', 'SearchHitEdge']) expect(fields(type).node.resolve, `${type}.node`).toBeUndefined();
    // Fields that compute something keep their resolvers.
    expect(fields('Session').parent.resolve).toBeTypeOf('function');
    expect(fields('Session').events.resolve).toBeTypeOf('function');
  });
});
