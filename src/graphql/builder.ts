import SchemaBuilder from '@pothos/core';
import RelayPlugin from '@pothos/plugin-relay';
import { GraphQLScalarType } from 'graphql';
import { DateTimeResolver, JSONResolver, SafeIntResolver } from 'graphql-scalars';
import type { Context } from './context.ts';
import { badInput } from '../core/errors.ts';
import { PROPERTY_READ } from './property-reads.ts';
import type { SessionRow } from '../store/session-rows.ts';
import { isoTime } from '../core/iso-time.ts';

/** Maximum page size of every connection; larger `first` is rejected. */
export const MAX_PAGE_SIZE = 500;
/** Page size of every connection when `first`/`last` are omitted (the query cost counts it too). */
export const DEFAULT_PAGE_SIZE = 50;
/** Most ids one `nodes(ids:)` takes: each is a lookup, and 100,000 of them took gigabytes. */
export const MAX_NODE_IDS = 100;

// Ids are typed by their prefix (ses_…, evt_…), so the Relay global id is the
// id itself: readable in URLs, recordings and the CLI, and still resolvable by node().
const TYPE_BY_PREFIX: Record<string, string> = { ses: 'Session', evt: 'Event' };

export const builder = new SchemaBuilder<{
  Context: Context;
  // Session's shape: the store's row (store/session-rows.ts); fields of other files attach to it by name.
  Objects: { Session: SessionRow };
  Scalars: {
    DateTime: { Input: Date; Output: Date };
    JSON: { Input: unknown; Output: unknown };
    SafeInt: { Input: number; Output: number };
    ID: { Input: string; Output: string };
  };
  DefaultFieldNullability: false;
}>({
  plugins: [RelayPlugin, 'propertyReads'],
  defaultFieldNullability: false,
  relay: {
    clientMutationId: 'omit',
    cursorType: 'String',
    // Read as properties, without a resolver (property-reads.ts).
    edgesFieldOptions: PROPERTY_READ,
    pageInfoFieldOptions: PROPERTY_READ,
    nodeFieldOptions: PROPERTY_READ,
    encodeGlobalID: (_typename, id) => String(id),
    nodesQueryOptions: {
      description: `The nodes of these ids, in order (null where there is none); at most ${MAX_NODE_IDS} ids.`,
      resolve: (_root, { ids }, _ctx, _info, resolveNodes) => {
        if (ids.length > MAX_NODE_IDS) throw badInput(`ids: at most ${MAX_NODE_IDS} ids per nodes query (got ${ids.length})`);
        return resolveNodes(ids);
      },
    },
    decodeGlobalID: (globalID) => {
      const typename = TYPE_BY_PREFIX[globalID.split('_')[0]];
      return { typename: typename ?? 'Unknown', id: globalID };
    },
  },
});

// graphql-scalars' DateTime serializes to the Date itself, which JSON.stringify
// then writes through its toJSON: a Date in a result takes the serializer off
// its fast path for the whole response (an events page of 100 serialized ~3x
// slower; npm run bench, readThroughput). The same text is written here, as a
// string (core/iso-time.ts), for every date it accepts (an invalid one stays a
// Date: its JSON is null).
const dateTime = DateTimeResolver.toConfig();
const DateTime = new GraphQLScalarType({
  ...dateTime,
  serialize: (value) => {
    const date = dateTime.serialize(value);
    return date instanceof Date && Number.isFinite(date.getTime()) ? isoTime(date) : date;
  },
});

builder.addScalarType('DateTime', DateTime);
builder.addScalarType('JSON', JSONResolver);
// Counts that may pass GraphQL's 32-bit Int (a long session's tokens), exact up to 2^53 - 1.
builder.addScalarType('SafeInt', SafeIntResolver);
builder.queryType({});
builder.mutationType({});
