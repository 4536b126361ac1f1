// Query shape limits: tokens (GraphQL Armor, at parse time: a document nested
// a few thousand levels deep would overflow graphql-js's recursive parser),
// depth and aliases (Armor, as validation rules), and cost (query-cost.ts,
// when the operation runs: page sizes sent as variables count). Page sizes
// themselves are capped at MAX_PAGE_SIZE by the connections (builder.ts,
// input.ts), the request body by the guard (http/http-body.ts), the response by
// response-size.ts.
import type { ExecutionArgs, GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { maxDepthPlugin } from '@escape.tech/graphql-armor-max-depth';
import { maxAliasesPlugin } from '@escape.tech/graphql-armor-max-aliases';
import { maxTokensPlugin } from '@escape.tech/graphql-armor-max-tokens';
import { operationCost } from '../query-cost.ts';
import { DEFAULT_PAGE_SIZE } from '../builder.ts';
import { asRequestError, requestError } from './error-codes.ts';
import { refuseOperation } from './refuse-operation.ts';
import { perDocument } from './per-document.ts';
import { DIFF_REQUEST_MAX_BYTES, FILE_READ_MAX_BYTES } from '../../store/file-blobs.ts';

export interface QueryLimits {
  maxTokens: number;
  maxDepth: number;
  maxAliases: number;
  maxCost: number;
}

/** What a client does instead of reading a once-per-operation field many times. */
const INSTEAD: Record<string, string> = {
  // A recording is a session's whole log as one string: GET /recordings streams any number of them.
  'Session.recording': ' (GET /recordings?session=<id> streams a recording)',
  'Session.file': ` (one file per request: each is up to ${FILE_READ_MAX_BYTES} bytes)`,
  'Session.files': ' (one tree per request: each lists up to the quota’s entries)',
  'Session.workspace': ' (one session’s notes per request: each holds up to 1,000 of 100,000 characters)',
  'Session.tools': ' (one session’s tools per request: a runner’s may be 500 of 64 KiB schemas; `tools` lists the catalog)',
  'Session.fileChanges': ` (one range of one session per request: each diffs up to ${DIFF_REQUEST_MAX_BYTES} bytes of text)`,
};

// Armor throws its refusal out of validation, which stops validating a
// document thousands of levels deep at once; yoga answers a thrown error by
// its extensions: marked, a 400 under application/graphql-response+json.
const refusals = { onReject: [(_ctx: unknown, err: GraphQLError) => void asRequestError(err)] };

export function useQueryLimits(limits: QueryLimits): Plugin {
  const refusal = (cost: number) =>
    requestError(
      `Query Cost limit of ${limits.maxCost} exceeded, found ${cost}: page sizes (first/last, as literals, variables or defaults; ` +
        `${DEFAULT_PAGE_SIZE} when omitted) multiply the cost of what they select`,
    );
  const check = (args: ExecutionArgs) => {
    const { cost, once } = operationCost(args.schema, args.document, args.operationName, args.variableValues);
    const repeated = Object.entries(once).find(([, times]) => times > 1);
    if (repeated) {
      const [field, times] = repeated;
      const instead = INSTEAD[field] ?? ' (it is the same each time)';
      return { errors: [requestError(`${field} may be read at most once per operation, and this one reads it up to ${times} times${instead}`)] };
    }
    return cost > limits.maxCost ? { errors: [refusal(cost)] } : undefined;
  };
  return {
    onPluginInit({ addPlugin }) {
      // Each counts what the document holds (per-document.ts).
      addPlugin(perDocument(maxTokensPlugin({ n: limits.maxTokens })));
      // Introspection (GraphiQL) is exempt from depth and cost; it is bounded by the schema.
      addPlugin(perDocument(maxDepthPlugin({ n: limits.maxDepth, ignoreIntrospection: true, ...refusals })));
      // Every alias counts, `__typename` ones too (Armor's default exempts them).
      addPlugin(perDocument(maxAliasesPlugin({ n: limits.maxAliases, allowList: [], ...refusals })));
    },
    ...refuseOperation(check),
  };
}
