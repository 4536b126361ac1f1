// Error extensions that are internal to the server: yoga's `http` (the status
// and headers an HTTP response takes from an error) and `unexpected`. yoga
// drops them from HTTP bodies; the WebSocket front (graphql-handler.ts) sends results
// itself, so it drops them here.
import { GraphQLError, type ExecutionResult } from 'graphql';

const INTERNAL = ['http', 'unexpected'];

const hasInternals = (e: GraphQLError) => e.extensions != null && INTERNAL.some((k) => k in e.extensions);

export function withoutInternals(e: GraphQLError): GraphQLError {
  if (!hasInternals(e)) return e;
  const extensions = Object.fromEntries(Object.entries(e.extensions).filter(([k]) => !INTERNAL.includes(k)));
  return new GraphQLError(e.message, { nodes: e.nodes, source: e.source, positions: e.positions, path: e.path, originalError: e.originalError, extensions });
}

/** The result as a client may see it; the same object when nothing is internal. */
export function resultWithoutInternals<R extends ExecutionResult>(result: R): R {
  if (!result.errors?.some(hasInternals)) return result;
  return { ...result, errors: result.errors.map(withoutInternals) };
}
