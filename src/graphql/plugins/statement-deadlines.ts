// An operation's reads are bounded in time (docs/operations.md "Memory and
// time"): each operation gets its statement scope in its context
// (`Context.statements`), which the resolvers pass to the store's reads a
// tenant controls (event pages, searches, session lists, a subscription's
// catch-up, a session's row and the batch loader's, its children, tree and
// fork points; the others through the operation's scoped view,
// graphql/scoped-reads.ts). A query's scoped reads together are bounded by
// FORKLINE_QUERY_TIMEOUT_MS, each of a subscription's on its own; they are
// cancelled when the client goes away (`Context.gone`), and a subscription's
// once it ends. Every other statement has its own bound on the pool
// (db/statement-deadlines.ts): a mutation's transaction each statement by
// FORKLINE_MUTATION_TIMEOUT_MS (a fork's, a deletion's, an import's by
// FORKLINE_LONG_STATEMENT_TIMEOUT_MS). A mutation is not cancelled when its
// client goes away: a write the client started is finished or rolled back,
// never left half-way by a dropped connection. Nothing here wraps an
// operation's execution: a scope is one small object per operation.
import { getOperationAST } from 'graphql';
import type { Plugin } from 'graphql-yoga';
import { statementScope, type StatementBound, type StatementTimeouts } from '../../db/statement-deadlines.ts';
import type { Context } from '../context.ts';

export function useStatementDeadlines(timeouts: StatementTimeouts): Plugin {
  const query: StatementBound = { timeoutMs: timeouts.queryMs, per: 'request', setting: 'FORKLINE_QUERY_TIMEOUT_MS' };
  const subscription: StatementBound = { timeoutMs: timeouts.queryMs, per: 'statement', setting: 'FORKLINE_QUERY_TIMEOUT_MS' };
  return {
    onExecute({ args }) {
      if (getOperationAST(args.document, args.operationName)?.operation !== 'query') return;
      const ctx = args.contextValue as Partial<Context>;
      ctx.statements = statementScope(query, ctx.gone);
    },
    onSubscribe({ args }) {
      const ctx = args.contextValue as Partial<Context>;
      const gone = ctx.gone;
      // Each statement on its own bound; all of them cancelled once the subscription ends or its client goes.
      let over = false;
      ctx.statements = statementScope(subscription, {
        get aborted() {
          return over || gone?.aborted === true;
        },
      });
      return {
        onSubscribeResult: () => ({
          onEnd: () => void (over = true),
        }),
      };
    },
  };
}
