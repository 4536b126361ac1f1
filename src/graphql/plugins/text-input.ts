// Postgres stores neither NUL (U+0000) nor lone UTF-16 surrogates (and JSON
// text with a lone surrogate is refused). Such strings in variables or
// literals are the client's error: reject them before anything executes.
import { GraphQLError, Kind, visit, type DocumentNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { JSON_ENVELOPE_VALUES, MAX_JSON_VALUES, isStorableText, tooManyValues, unstorableReason } from '../../core/storable.ts';
import { UNSTORABLE_TEXT } from '../../core/input-rules.ts';

/**
 * Variables may nest deeper than a payload (model settings): only their text and their number of values are checked
 * here (before any resolver or zod walks them: MAX_JSON_VALUES for a request's variables together, and their envelope); payloads get the
 * depth bound in the codec. The text they came in (a body, a graphql-ws message) was held to MAX_JSON_TEXT_DEPTH at
 * the door (core/storable.ts), a GET's by the 16 KiB of its headers.
 */
// A payload at MAX_JSON_VALUES is taken at every door: a request's variables hold it with their own few values around it.
const VARIABLES_VALUES = MAX_JSON_VALUES + JSON_ENVELOPE_VALUES;
const variablesReason = (value: unknown) => unstorableReason(value, Infinity, true, VARIABLES_VALUES);
/** unstorableReason's answer for too many values: built once, compared on every operation. */
const TOO_MANY_VALUES = tooManyValues(VARIABLES_VALUES);

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

const rejection = (message: string) => ({
  errors: [new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT' } })],
});

/** Why the request is refused before it runs, or undefined. */
function refusal(args: { document: DocumentNode; variableValues?: unknown }): string | undefined {
  const reason = variablesReason(args.variableValues);
  if (reason === TOO_MANY_VALUES) return `variables: ${tooManyValues(MAX_JSON_VALUES)}: send fewer events or values per request`;
  return reason !== undefined || hasUnstorableLiteral(args.document) ? `strings ${UNSTORABLE_TEXT}` : undefined;
}

export function useStorableText(): Plugin {
  return {
    onExecute({ args, setResultAndStopExecution }) {
      const refused = refusal(args);
      if (refused) setResultAndStopExecution(rejection(refused));
    },
    onSubscribe({ args, setResultAndStopExecution }) {
      const refused = refusal(args);
      if (refused) setResultAndStopExecution(rejection(refused));
    },
  };
}
