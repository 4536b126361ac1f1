// A Pothos plugin: fields marked as reading their parent's property of the
// same name get no resolver, so the query JIT (plugins/jit.ts) reads them
// inline. With a resolver it calls it through a resolve info, a response path
// and three closures per row. builder.ts marks, through the relay plugin's
// options, a connection's `edges` and `pageInfo` and an edge's `node` (the
// relay plugin resolves them with `(parent) => parent.<name>`); the Node types
// mark their `id` (the global id is the id itself: builder.ts encodes with the
// identity, but the relay plugin resolves it in an async wrapper, which made
// every row of a page a promise). A marked field must read exactly that property.
import SchemaBuilder, { BasePlugin, type PothosOutputFieldConfig, type SchemaTypes } from '@pothos/core';
import { defaultFieldResolver, type GraphQLFieldResolver } from 'graphql';

/** Field options that mark a field as a read of its parent's property of the same name. */
export const PROPERTY_READ = { extensions: { propertyRead: true } } as const;

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  export namespace PothosSchemaTypes {
    interface Plugins<Types extends SchemaTypes> {
      propertyReads: PropertyReadsPlugin<Types>;
    }
  }
}

class PropertyReadsPlugin<Types extends SchemaTypes> extends BasePlugin<Types> {
  // Pothos leaves a field whose resolver is graphql's default without one.
  override wrapResolve(resolver: GraphQLFieldResolver<unknown, Types['Context'], object>, field: PothosOutputFieldConfig<Types>) {
    return field.extensions?.propertyRead === true ? defaultFieldResolver : resolver;
  }
}

SchemaBuilder.registerPlugin('propertyReads', PropertyReadsPlugin);
