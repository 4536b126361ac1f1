import { isInterfaceType, isObjectType, type GraphQLSchema } from 'graphql';
import { builder } from './builder.ts';
import './types/session.ts';
import './types/event.ts';
import './types/mutations.ts';
import './types/agent.ts';
import './types/family.ts';
import './types/recordings.ts';
import './types/subscriptions.ts';
import './types/search.ts';
import './types/models.ts';
import './types/tools.ts';
import './types/instructions.ts';
import './types/tool-approval.ts';
import './types/api-tokens.ts';
import './types/compaction.ts';
import './types/runners.ts';

export const schema = withPropertyReads(builder.toSchema({ sortSchema: false }));

/**
 * Fields that only read their parent's property of the same name get no
 * resolver, so the query JIT (plugins/jit.ts) reads them inline. With a
 * resolver it calls it through a resolve info, a response path and three
 * closures per row. Two kinds, both from Pothos' relay plugin:
 * - a Node's `id`: the global id is the id itself (builder.ts encodes with
 *   the identity), but the plugin resolves it in an async wrapper, which made
 *   every row of a page a promise;
 * - a connection's `edges` and `pageInfo` and an edge's `node`, resolved by
 *   `(parent)=>parent.<name>`.
 * Together with the class edges of sessions-connection.ts this cuts the server
 * CPU per request of readThroughput's sessions page (the bench says by how much).
 */
function withPropertyReads(built: GraphQLSchema): GraphQLSchema {
  const node = built.getType('Node');
  if (isInterfaceType(node)) for (const type of built.getPossibleTypes(node)) type.getFields().id.resolve = undefined;
  for (const type of Object.values(built.getTypeMap())) {
    if (!isObjectType(type) || !/(Connection|Edge)$/.test(type.name)) continue;
    for (const field of Object.values(type.getFields())) {
      if (String(field.resolve).replace(/\s/g, '') === `(parent)=>parent.${field.name}`) field.resolve = undefined;
    }
  }
  return built;
}
