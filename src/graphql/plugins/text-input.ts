// Postgres stores neither NUL (U+0000) nor lone UTF-16 surrogates (and JSON
// text with a lone surrogate is refused). Such strings in variables or
// literals are the client's error: reject them before anything executes.
import { GraphQLError, Kind, visit, type DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { isStorableText, unstorableReason } from '../../core/storable.ts';
import { UNSTORABLE_TEXT } from '../../core/input-rules.ts';

/** Variables may be nested deeply (model settings): only their text is checked here; payloads get the depth bound in the codec. */
const hasUnstorableString = (value: unknown) => unstorableReason(value, Infinity, true) !== undefined;

// Per document: yoga's parse cache hands out the same document for the same text.
const literalChecked = new WeakMap<DocumentNode, boolean>();

function hasUnstorableLiteral(document: DocumentNode): boolean {
  let found = literalChecked.get(document);
  if (found === undefined) {
    found = false;
    visit(document, {
      [Kind.STRING]: (node) => {
        if (!isStorableText(node.value)) found = true;
      },
    });
    literalChecked.set(document, found);
  }
  return found;
}

const rejection = () => ({
  errors: [new GraphQLError(`strings ${UNSTORABLE_TEXT}`, { extensions: { code: 'BAD_USER_INPUT' } })],
});

export function useStorableText(): Plugin {
  const check = (args: { document: DocumentNode; variableValues?: unknown }) => hasUnstorableString(args.variableValues) || hasUnstorableLiteral(args.document);
  return {
    onExecute({ args, setResultAndStopExecution }) {
      if (check(args)) setResultAndStopExecution(rejection());
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      if (check(args)) setResultAndStopExecution(rejection());
    },
  };
}
