// Postgres stores neither NUL (U+0000) nor lone UTF-16 surrogates, and Prisma
// fails on the latter before Postgres sees them. Such strings in variables or
// literals are the client's error: reject them before anything executes.
import { GraphQLError, Kind, visit, type DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';

// In unicode mode \p{Cs} matches only unpaired surrogates.
const storable = (s: string) => !s.includes('\u0000') && !/\p{Cs}/u.test(s);

/** The first unstorable string among the values (iteratively: variables may be nested deeply). */
function hasUnstorableString(value: unknown): boolean {
  const stack: unknown[] = [value];
  while (stack.length) {
    const v = stack.pop();
    if (typeof v === 'string') {
      if (!storable(v)) return true;
    } else if (Array.isArray(v)) {
      stack.push(...v);
    } else if (v && typeof v === 'object') {
      for (const [k, x] of Object.entries(v)) {
        if (!storable(k)) return true;
        stack.push(x);
      }
    }
  }
  return false;
}

function hasUnstorableLiteral(document: DocumentNode): boolean {
  let found = false;
  visit(document, {
    [Kind.STRING]: (node) => {
      if (!storable(node.value)) found = true;
    },
  });
  return found;
}

const rejection = () => ({
  errors: [
    new GraphQLError('strings must be well-formed Unicode without NUL characters (U+0000)', { extensions: { code: 'BAD_USER_INPUT' } }),
  ],
});

export function useStorableText(): Plugin {
  const check = (args: { document: DocumentNode; variableValues?: unknown }) =>
    hasUnstorableString(args.variableValues) || hasUnstorableLiteral(args.document);
  return {
    onExecute({ args, setResultAndStopExecution }) {
      if (check(args)) setResultAndStopExecution(rejection());
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      if (check(args)) setResultAndStopExecution(rejection());
    },
  };
}
