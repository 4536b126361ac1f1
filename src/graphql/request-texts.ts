import type { GraphQLResolveInfo } from 'graphql';
import { TextBudget, type BoundedText } from '../core/text-budget.ts';
import type { TextKey } from '../store/session-log.ts';
import type { Context } from './context.ts';

/**
 * Each request's text budget: the log's page bytes (FORKLINE_PAGE_BYTES) for all its texts (docs/operations.md
 * "Memory and time"). A subscription keeps its context for its life and executes each payload as its own root
 * value: each payload is a request of its own, with a budget of its own.
 */
const budgets = new WeakMap<Context, { root: unknown; budget: TextBudget }>();
/** Texts already read in a request, by the object whose fields show them (a text and its `truncated` share one read). */
const reads = new WeakMap<object, Promise<BoundedText>>();

export function textBudgetOf(ctx: Context, info: Pick<GraphQLResolveInfo, 'rootValue'>): TextBudget {
  let held = budgets.get(ctx);
  if (!held || held.root !== info.rootValue) budgets.set(ctx, (held = { root: info.rootValue, budget: new TextBudget(ctx.store.log.pageBytes) }));
  return held.budget;
}

/** The text `key` of event `seq` of session `sessionId` that `owner` shows, read once within the request's budget. */
export function requestText(ctx: Context, info: GraphQLResolveInfo, owner: object, sessionId: string, seq: number, key: TextKey): Promise<BoundedText> {
  let read = reads.get(owner);
  if (!read) {
    read = ctx.store.log.textWithin(sessionId, seq, key, textBudgetOf(ctx, info)).then((t) => t ?? { text: '', length: 0, truncated: false });
    reads.set(owner, read);
  }
  return read;
}
