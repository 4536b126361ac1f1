import type { GraphQLResolveInfo } from 'graphql';
import { TextBudget, type BoundedText } from '../core/text-budget.ts';
import type { LogRef, TextKey } from '../store/session-log.ts';
import type { Context } from './context.ts';

/**
 * Each request's text budget: the log's page bytes (FORKLINE_PAGE_BYTES) for all its texts (docs/operations.md
 * "Memory and time"). A subscription keeps its context for its life and executes each payload as its own root
 * value: each payload is a request of its own, with a budget of its own.
 */
const budgets = new WeakMap<Context, { root: unknown; budget: TextBudget }>();
/**
 * Texts already read in a request, by the object whose fields show them and the text they show (a turn shows its
 * input and its error): a text and its `truncated` and length share one read, two texts of one object are two.
 */
const reads = new WeakMap<object, Map<string, Promise<BoundedText | null>>>();

/** A text field of an event that has none (its key is not a string). */
const NO_TEXT: BoundedText = { text: '', length: 0, truncated: false };

export function textBudgetOf(ctx: Context, info: Pick<GraphQLResolveInfo, 'rootValue'>): TextBudget {
  let held = budgets.get(ctx);
  if (!held || held.root !== info.rootValue) budgets.set(ctx, (held = { root: info.rootValue, budget: new TextBudget(ctx.store.log.pageBytes) }));
  return held.budget;
}

/**
 * The text `text` (a name: `input`, `error`…) that `owner` shows, read once per request by `read` within the
 * request's budget; null when `read` finds none.
 */
export function requestText(
  ctx: Context,
  info: GraphQLResolveInfo,
  owner: object,
  text: string,
  read: (budget: TextBudget) => Promise<BoundedText | null | undefined>,
): Promise<BoundedText | null> {
  let texts = reads.get(owner);
  if (!texts) reads.set(owner, (texts = new Map()));
  let held = texts.get(text);
  if (!held) texts.set(text, (held = read(textBudgetOf(ctx, info)).then((t) => t ?? null)));
  return held;
}

/**
 * The text `key` of event `seq` of `log` that `owner` shows, `length` characters long (StoredEvent.textLength, read
 * with the event: then one statement), read once per request within its budget.
 */
export const eventText = (
  ctx: Context,
  info: GraphQLResolveInfo,
  owner: object,
  event: { log: LogRef; seq: number; key: TextKey; length?: number | null },
): Promise<BoundedText> =>
  requestText(ctx, info, owner, event.key, (budget) => ctx.store.log.textWithin(event.log, event.seq, event.key, budget, event.length)).then(
    (t) => t ?? NO_TEXT,
  );
