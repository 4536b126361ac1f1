// An operation's database work is bounded in time (docs/operations.md "Memory
// and time"): a query's statements together by FORKLINE_QUERY_TIMEOUT_MS, a
// mutation's by FORKLINE_MUTATION_TIMEOUT_MS, each statement of a long
// mutation (a field marked `longStatements`: forks, deletions, imports, a
// compaction that waits for a turn) by FORKLINE_LONG_STATEMENT_TIMEOUT_MS, and
// each statement of a subscription by the query bound. Past its bound a
// statement is cancelled on the server and the field fails with QUERY_TIMEOUT.
// A query's or subscription's statements are cancelled when its client goes
// away (`Context.gone`); a mutation's are not: a write the client started is
// finished or rolled back, never left half-way by a dropped connection.
import { getOperationAST, type ExecutionArgs, type GraphQLObjectType, type OperationDefinitionNode } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { inStatementScope, statementScope, withStatementScope, type StatementBound, type StatementTimeouts } from '../../db/statement-deadlines.ts';
import type { Context } from '../context.ts';

/** The field extension that marks a mutation whose work is legitimately long (each statement bounded, not the whole). */
export const LONG_STATEMENTS = { longStatements: true } as const;

const rootFieldsOf = (operation: OperationDefinitionNode) => operation.selectionSet.selections.flatMap((s) => (s.kind === 'Field' ? [s.name.value] : [])); // fragments at the root: bounded as a plain mutation

function isLong(type: GraphQLObjectType | null | undefined, operation: OperationDefinitionNode): boolean {
  const fields = type?.getFields();
  return rootFieldsOf(operation).some((name) => fields?.[name]?.extensions?.longStatements === true);
}

export function useStatementDeadlines(timeouts: StatementTimeouts): Plugin {
  const query: StatementBound = { timeoutMs: timeouts.queryMs, per: 'request', setting: 'FORKLINE_QUERY_TIMEOUT_MS' };
  const mutation: StatementBound = { timeoutMs: timeouts.mutationMs, per: 'request', setting: 'FORKLINE_MUTATION_TIMEOUT_MS' };
  const long: StatementBound = { timeoutMs: timeouts.longStatementMs, per: 'statement', setting: 'FORKLINE_LONG_STATEMENT_TIMEOUT_MS' };
  const subscription: StatementBound = { timeoutMs: timeouts.queryMs, per: 'statement', setting: 'FORKLINE_QUERY_TIMEOUT_MS' };
  const boundOf = (args: ExecutionArgs): StatementBound | undefined => {
    const operation = getOperationAST(args.document, args.operationName);
    if (!operation) return undefined;
    if (operation.operation === 'query') return query;
    if (operation.operation === 'mutation') return isLong(args.schema.getMutationType(), operation) ? long : mutation;
    return subscription;
  };
  return {
    onExecute({ args, executeFn, setExecuteFn }) {
      const bound = boundOf(args);
      if (!bound) return;
      const gone = bound === query ? (args.contextValue as Partial<Context>).gone : undefined;
      setExecuteFn((a) => inStatementScope(statementScope(bound, gone), () => executeFn(a)));
    },
    onSubscribe({ args, subscribeFn, setSubscribeFn }) {
      const bound = boundOf(args);
      if (!bound) return;
      const gone = (args.contextValue as Partial<Context>).gone;
      setSubscribeFn(async (a) => {
        // Each statement on its own bound; all of them cancelled once the subscription ends or its client goes.
        let over = false;
        const scope = statementScope(bound, {
          get aborted() {
            return over || gone?.aborted === true;
          },
        });
        const result = await withStatementScope(scope, () => subscribeFn(a));
        if (!(Symbol.asyncIterator in Object(result))) return ((scope.ended = true), result);
        const source = result as AsyncGenerator;
        const end = () => ((scope.ended = over = true), undefined);
        // The iterator is driven from the transport's context: each step runs in the scope.
        const scoped: AsyncGenerator = {
          next: (...v) => withStatementScope(scope, () => source.next(...v)),
          return: (v) => (end(), source.return(v)),
          throw: (e) => (end(), source.throw(e)),
          [Symbol.asyncIterator]() {
            return this;
          },
        };
        return scoped;
      });
    },
  };
}
