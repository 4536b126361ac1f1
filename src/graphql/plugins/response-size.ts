// A ceiling on the size of a query's or mutation's response (HTTP, its fast
// lane and graphql-ws alike). The cost limit (limits.ts) keeps a request from
// asking for much; this catches what it cannot see, such as large event data
// or a long session's recording. The result is serialized here once: a
// response under the ceiling is sent as that text (yoga's result processor
// uses a result's `stringify`), one over it is replaced by an error and never
// sent.
import { GraphQLError, getOperationAST, type ExecutionResult } from 'graphql';
import type { Plugin } from 'graphql-yoga';

export const RESPONSE_TOO_LARGE = 'RESPONSE_TOO_LARGE';

/** UTF-8 bytes of `text`, computed only when its length does not settle the comparison. */
function isOver(text: string, maxBytes: number): { over: boolean; bytes: number } {
  if (text.length > maxBytes) return { over: true, bytes: Buffer.byteLength(text) };
  if (text.length * 3 <= maxBytes) return { over: false, bytes: text.length };
  const bytes = Buffer.byteLength(text);
  return { over: bytes > maxBytes, bytes };
}

export function useResponseSizeLimit(maxBytes: number): Plugin {
  return {
    onExecute({ args }) {
      return {
        onExecuteDone({ result, setResult }) {
          if (!result || Symbol.asyncIterator in result) return;
          const text = JSON.stringify(result);
          const { over, bytes } = isOver(text, maxBytes);
          if (!over) {
            // Sent as it is: yoga's serializer takes this text instead of serializing again.
            if (!result.errors?.length && !result.extensions) Object.assign(result, { stringify: (r: unknown) => (r === result ? text : JSON.stringify(r)) });
            return;
          }
          const ran = getOperationAST(args.document, args.operationName)?.operation === 'mutation' ? ' (the mutation was applied)' : '';
          const refused: ExecutionResult = {
            data: null,
            errors: [
              new GraphQLError(
                `the response would be ${bytes} bytes, over the limit of ${maxBytes} (FORKLINE_MAX_RESPONSE_BYTES)${ran}: ask for fewer fields, smaller pages or fewer aliases`,
                { extensions: { code: RESPONSE_TOO_LARGE } },
              ),
            ],
          };
          setResult(refused);
        },
      };
    },
  };
}
