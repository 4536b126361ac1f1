// A ceiling on the size of a query's or mutation's response (HTTP, its fast
// lane and graphql-ws alike). The cost limit (limits.ts) keeps a request from
// asking for much; this catches what it cannot see, such as large event data
// or a long session's recording. Over HTTP the check runs where the result is
// serialized (its `stringify`, which yoga's result processor and the fast lane
// both use), so it is serialized once; a response over the ceiling is replaced
// by an error and never sent.
import { GraphQLError, getOperationAST, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../context.ts';

export const RESPONSE_TOO_LARGE = 'RESPONSE_TOO_LARGE';

/** UTF-8 bytes of `text`, computed only when its length does not settle the comparison. */
export function isOver(text: string, maxBytes: number): { over: boolean; bytes: number } {
  if (text.length > maxBytes) return { over: true, bytes: Buffer.byteLength(text) };
  if (text.length * 3 <= maxBytes) return { over: false, bytes: text.length };
  const bytes = Buffer.byteLength(text);
  return { over: bytes > maxBytes, bytes };
}

/** The result sent instead of one of `bytes` over `maxBytes`. */
export function responseTooLarge(bytes: number, maxBytes: number, mutationApplied = false): ExecutionResult {
  const ran = mutationApplied ? ' (the mutation was applied)' : '';
  return {
    data: null,
    errors: [
      new GraphQLError(
        `the response would be ${bytes} bytes, over the limit of ${maxBytes} (FORKLINE_MAX_RESPONSE_BYTES)${ran}: ask for fewer fields, smaller pages or fewer aliases`,
        { extensions: { code: RESPONSE_TOO_LARGE } },
      ),
    ],
  };
}

/** What an onExecute hook may return: the hooks of that operation's end. */
type ExecuteHooks = Extract<Awaited<ReturnType<NonNullable<Plugin['onExecute']>>>, object>;

export function useResponseSizeLimit(maxBytes: number): Plugin {
  // Everything per operation type is made once here, not per request: a
  // closure made per request costs its allocation (and, under tsx, the
  // function name it is given) on every read.
  const hooksFor = (mutation: boolean) => {
    const refusal = (bytes: number) => responseTooLarge(bytes, maxBytes, mutation);
    // Over HTTP (yoga's result processor and the fast lane) a result is
    // serialized once, by its `stringify`: measured there, as it is written.
    // Serializing it here as well, eagerly, cost the events page 12-15% of its
    // throughput (npm run bench, readThroughput).
    const stringify = (r: unknown) => {
      const text = JSON.stringify(r);
      const { over, bytes } = isOver(text, maxBytes);
      return over ? JSON.stringify(refusal(bytes)) : text;
    };
    const overHttp: ExecuteHooks = {
      onExecuteDone({ result }) {
        if (!result || Symbol.asyncIterator in result) return;
        (result as { stringify?: typeof stringify }).stringify = stringify;
      },
    };
    // graphql-ws writes its own messages: the result is measured here.
    const overWebSocket: ExecuteHooks = {
      onExecuteDone({ result, setResult }) {
        if (!result || Symbol.asyncIterator in result) return;
        const { over, bytes } = isOver(JSON.stringify(result), maxBytes);
        if (over) setResult(refusal(bytes));
      },
    };
    return { overHttp, overWebSocket };
  };
  const forQuery = hooksFor(false);
  const forMutation = hooksFor(true);
  return {
    onExecute({ args }) {
      const hooks = getOperationAST(args.document, args.operationName)?.operation === 'mutation' ? forMutation : forQuery;
      // The GraphQL door (http/graphql/graphql-handler.ts) sets `ws` on a graphql-ws operation's context.
      return (args.contextValue as Partial<Context> | undefined)?.ws ? hooks.overWebSocket : hooks.overHttp;
    },
  };
}
