// The store as an operation's own reads see it: within its statement scope
// (Context.statements: its deadline, cancelled once its client has gone;
// docs/operations.md "Database time"), for the resolvers whose reads go
// through the store's views (a session's turns, files, recording; an event
// by id) rather than name the scope on each read as the hot ones do (a
// session's row, an events page). One view per operation, made the first time
// a resolver asks: the operations that never ask pay nothing.
import type { StatementScope } from '../db/statement-deadlines.ts';
import type { TenantStore } from '../store/session-store.ts';
import type { Context } from './context.ts';

/** Each operation's scoped view, by its scope (one scope per operation; gone with it). */
const views = new WeakMap<StatementScope, TenantStore>();

/** `ctx.store` as the operation's reads see it (itself when the operation has no scope: a mutation, or bounds off). */
export function scopedReads(ctx: Pick<Context, 'store' | 'statements'>): TenantStore {
  const statements = ctx.statements;
  if (!statements) return ctx.store;
  let view = views.get(statements);
  if (!view) views.set(statements, (view = ctx.store.reading(statements)));
  return view;
}
