// Feeds ServiceMetrics from yoga/envelop hooks: operations by type and root
// field, errors by code, open subscriptions, fork mutation durations.
import { Kind, getOperationAST, type DocumentNode, type GraphQLError } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import type { ServiceMetrics } from '../../metrics.ts';

const FORK_FIELDS: Record<string, string> = { forkSession: 'fork', branchSession: 'branch' };

// Per document and operation: yoga's parse cache hands out the same document for the same text.
const rootFieldsOf = new WeakMap<DocumentNode, Map<string, { type: string; fields: string[] }>>();

function rootFields(document: DocumentNode, operationName?: string | null) {
  let byName = rootFieldsOf.get(document);
  if (!byName) rootFieldsOf.set(document, (byName = new Map()));
  let found = byName.get(operationName ?? '');
  if (!found) byName.set(operationName ?? '', (found = readRootFields(document, operationName)));
  return found;
}

function readRootFields(document: DocumentNode, operationName?: string | null) {
  const op = getOperationAST(document, operationName);
  if (!op) return { type: 'unknown', fields: [] as string[] };
  const fields = op.selectionSet.selections.flatMap((s) => (s.kind === Kind.FIELD ? [s.name.value] : []));
  return { type: op.operation as string, fields };
}

function isAsyncIterable(x: unknown): x is AsyncIterable<unknown> {
  return x != null && typeof (x as AsyncIterable<unknown>)[Symbol.asyncIterator] === 'function';
}

export function countErrors(metrics: ServiceMetrics, errors: readonly GraphQLError[] | readonly { extensions?: Record<string, unknown> }[] | undefined) {
  for (const e of errors ?? []) metrics.errors.inc({ code: String(e.extensions?.code ?? 'UNKNOWN') });
}

export function useMetrics(metrics: ServiceMetrics): Plugin {
  return {
    onExecute({ args }) {
      const { type, fields } = rootFields(args.document, args.operationName);
      for (const field of fields) metrics.operations.inc({ type, field });
      const kind = type === 'mutation' ? fields.map((f) => FORK_FIELDS[f]).find(Boolean) : undefined;
      if (!kind) return;
      const end = metrics.forkDuration.startTimer({ kind });
      return { onExecuteDone: () => void end() };
    },
    onSubscribe({ args }) {
      const { type, fields } = rootFields(args.document, args.operationName);
      for (const field of fields) metrics.operations.inc({ type, field });
      return {
        onSubscribeResult({ result }) {
          if (!isAsyncIterable(result)) return;
          metrics.activeSubscriptions.inc();
          return { onEnd: () => metrics.activeSubscriptions.dec() };
        },
      };
    },
    // HTTP responses (the WebSocket front counts its own in graphql-handler.ts).
    onResultProcess({ result }) {
      for (const r of Array.isArray(result) ? result : [result]) {
        if (r && !isAsyncIterable(r) && 'errors' in r) countErrors(metrics, r.errors as GraphQLError[]);
      }
    },
  };
}
