// Requests the process holds for as long as they live: a subscription keeps
// its request (graphql-ws the whole subscribe message, its id, query,
// variables and extensions, and the parsed document; an SSE stream its HTTP
// request, body and query text), and a graphql-ws socket its connection_init
// payload. A query's request is let go once it is answered; these may be held
// for days, so they are held to a size of their own, far below the body limit
// (docs/operations.md "Memory and time"): eight SSE subscriptions with bodies
// of 4 MiB held 173 MiB while they lived.
import { GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { jsonCharsPast } from '../../core/storable.ts';
import { REQUEST_TOO_LARGE } from '../../core/errors.ts';

/** Why a request held while it lives (`what`) is refused: it holds more than `maxChars` characters. */
export const heldRequestTooLarge = (what: string, maxChars: number) =>
  `${what} holds more than ${maxChars} characters (FORKLINE_MAX_HELD_REQUEST_CHARS): it is kept as long as it lives`;

/** What the door put in the context: the request's GraphQL parameters, and a graphql-ws operation's id. */
interface RequestOfContext {
  params?: { query?: unknown; variables?: unknown; extensions?: unknown; operationName?: unknown };
  ws?: { id?: unknown };
}

/** Subscriptions (SSE and graphql-ws alike) whose request holds more than `maxChars` characters are refused before they start. */
export function useHeldRequestLimit(maxChars: number): Plugin {
  const message = heldRequestTooLarge("a subscription's request (its query, variables, extensions and id)", maxChars);
  return {
    onSubscribe({ args, setResultAndStopExecution }) {
      const { params, ws } = (args.contextValue ?? {}) as RequestOfContext;
      if (jsonCharsPast([params?.query, params?.variables, params?.extensions, params?.operationName, ws?.id], maxChars)) {
        setResultAndStopExecution({ errors: [new GraphQLError(message, { extensions: { code: REQUEST_TOO_LARGE } })] });
      }
    },
  };
}
