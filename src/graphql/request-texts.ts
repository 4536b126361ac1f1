import { TextBudget, type BoundedText } from '../core/text-budget.ts';
import type { TextKey } from '../store/session-log.ts';
import type { Context } from './context.ts';

/** Each request's text budget: the log's page bytes (FORKLINE_PAGE_BYTES) for all its texts (docs/operations.md "Memory and time"). */
const budgets = new WeakMap<Context, TextBudget>();
/** Texts already read in a request, by the object whose fields show them (a text and its `truncated` share one read). */
const reads = new WeakMap<object, Promise<BoundedText>>();

export function textBudgetOf(ctx: Context): TextBudget {
  let budget = budgets.get(ctx);
  if (!budget) budgets.set(ctx, (budget = new TextBudget(ctx.store.log.pageBytes)));
  return budget;
}

/** The text `key` of event `seq` of session `sessionId` that `owner` shows, read once within the request's budget. */
export function requestText(ctx: Context, owner: object, sessionId: string, seq: number, key: TextKey): Promise<BoundedText> {
  let read = reads.get(owner);
  if (!read) {
    read = ctx.store.log.textWithin(sessionId, seq, key, textBudgetOf(ctx)).then((t) => t ?? { text: '', length: 0, truncated: false });
    reads.set(owner, read);
  }
  return read;
}
