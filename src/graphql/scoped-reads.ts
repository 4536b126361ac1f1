// The store as an operation's own reads see it: within its statement scope
// (Context.statements: its deadline, cancelled once its client has gone;
// docs/operations.md "Database time"), for the resolvers whose reads go
// through the store's views (a session's turns, texts, files, recording,
// instructions, tools, workspace, open approvals, totals; an event by id, a
// search hit's event) rather than name the scope on each read as the hot ones
// do (a session's row, an events page). One view per operation, kept on its
// context (one context per operation) the first time a resolver asks: the
// operations that never ask pay nothing.
import type { TenantStore } from '../store/session-store.ts';
import type { Context } from './context.ts';

/** `ctx.store` as the operation's reads see it (itself when the operation has no scope: a mutation, or bounds off). */
export function scopedReads(ctx: Pick<Context, 'store' | 'statements' | 'reads'>): TenantStore {
  const statements = ctx.statements;
  if (!statements) return ctx.store;
  return (ctx.reads ??= ctx.store.reading(statements));
}
