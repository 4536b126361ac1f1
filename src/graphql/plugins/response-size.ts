// A ceiling on the size of a query's or mutation's response (HTTP, its fast
// lane and graphql-ws alike). The cost limit (limits.ts) keeps a request from
// asking for much; this catches what it cannot see, such as large event data
// or a long session's recording. Over HTTP the check runs where the result is
// serialized (its `stringify`, which yoga's result processor and the fast lane
// both use), so it is serialized once; a response over the ceiling is replaced
// by an error and never sent. Each event of a subscription is held to the same
// ceiling, measured without building it (jsonBytes), and one over it ends the
// subscription with that error (http/graphql/ws-delivery.ts does the same for
// the events it writes itself).
import { GraphQLError, getOperationAST, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { Context } from '../context.ts';
import { RESPONSE_TOO_LARGE } from '../../core/errors.ts';

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

/** Characters JSON escapes as two (`\"` `\\` `\n`…) and as six (`\u0000`…). */
const SHORT_ESCAPES = /["\\\b\f\n\r\t]/g;
// eslint-disable-next-line no-control-regex -- the characters JSON escapes
const LONG_ESCAPES = /[\u0000-\u0007\u000b\u000e-\u001f]/g;

function stringBytes(s: string): number {
  return Buffer.byteLength(s) + 2 + (s.match(SHORT_ESCAPES)?.length ?? 0) + 5 * (s.match(LONG_ESCAPES)?.length ?? 0);
}

/**
 * The UTF-8 size of JSON.stringify(value) without building it; an object met
 * again (one event's data under thirty aliases) is measured once. Exact for
 * the plain JSON values a GraphQL result holds (lone surrogates aside).
 */
export function jsonBytes(value: unknown, measured = new Map<object, number>()): number {
  if (value === null) return 4;
  switch (typeof value) {
    case 'string':
      return stringBytes(value);
    case 'number':
      return Number.isFinite(value) ? String(value).length : 4;
    case 'boolean':
      return value ? 4 : 5;
    case 'object':
      break;
    default:
      return 0; // undefined, functions: left out (as null in an array: rare in a result, not counted)
  }
  const known = measured.get(value);
  if (known !== undefined) return known;
  let bytes = 2;
  if (Array.isArray(value)) {
    bytes += Math.max(0, value.length - 1);
    for (const v of value) bytes += v === undefined ? 4 : jsonBytes(v, measured);
  } else {
    let first = true;
    for (const [k, v] of Object.entries(value)) {
      if (v === undefined || typeof v === 'function') continue;
      bytes += (first ? 0 : 1) + stringBytes(k) + 1 + jsonBytes(v, measured);
      first = false;
    }
  }
  measured.set(value, bytes);
  return bytes;
}

type Results = AsyncIterableIterator<ExecutionResult> | AsyncGenerator<ExecutionResult>;

/**
 * A subscription's results, each held to the ceiling: one over it is
 * replaced by the refusal, and the subscription ends there (an event left out
 * silently would be a gap in an ordered stream).
 */
function endingAtOversized(source: Results, maxBytes: number): AsyncIterableIterator<ExecutionResult> {
  let ended = false;
  const done = { done: true, value: undefined } as IteratorReturnResult<undefined>;
  const it: AsyncIterableIterator<ExecutionResult> = {
    async next() {
      if (ended) return done;
      const n = await source.next();
      if (n.done) return n;
      const bytes = jsonBytes(n.value);
      if (bytes <= maxBytes) return n;
      ended = true;
      void source.return?.(undefined);
      return { done: false, value: responseTooLarge(bytes, maxBytes) };
    },
    // Straight to the source: a client's complete must not wait for the next event.
    return: async () => {
      ended = true;
      await source.return?.(undefined);
      return done;
    },
    throw: async (err) => {
      ended = true;
      if (source.throw) return source.throw(err);
      throw err;
    },
    [Symbol.asyncIterator]: () => it,
  };
  return it;
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
  // Subscriptions (over SSE, and the graphql-ws ones not delivered directly, http/graphql/ws-delivery.ts): each event's result.
  const subscribed = {
    onSubscribeResult({ result, setResult }: { result: unknown; setResult: (r: AsyncIterableIterator<ExecutionResult>) => void }) {
      if (result && typeof result === 'object' && Symbol.asyncIterator in result) setResult(endingAtOversized(result as Results, maxBytes));
    },
  };
  return {
    onSubscribe: () => subscribed,
    onExecute({ args }) {
      const hooks = getOperationAST(args.document, args.operationName)?.operation === 'mutation' ? forMutation : forQuery;
      // The GraphQL door (http/graphql/graphql-handler.ts) sets `ws` on a graphql-ws operation's context.
      return (args.contextValue as Partial<Context> | undefined)?.ws ? hooks.overWebSocket : hooks.overHttp;
    },
  };
}
