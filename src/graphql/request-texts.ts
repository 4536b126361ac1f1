// A request's texts (Context.texts): its text budget, the log's page bytes (FORKLINE_PAGE_BYTES) for all its texts
// (docs/operations.md "Memory and time"), and the texts it has read, by the object whose fields show them and the
// text they show (a turn shows its input and its error): a text and its `truncated` and length share one read, two
// texts of one object are two. A subscription keeps its context for its life and executes each payload as its own
// root value: each payload is a request of its own, with texts of its own.
import type { GraphQLResolveInfo } from 'graphql';
import { TextBudget, type BoundedText } from '../core/text-budget.ts';
import type { LogRef, TextKey } from '../store/session-log.ts';
import type { Context, RequestTexts } from './context.ts';
import { scopedReads } from './scoped-reads.ts';

/** A text field of an event that has none (its key is not a string). */
const NO_TEXT: BoundedText = { text: '', length: 0, truncated: false };

/** The texts of the execution `info` belongs to (a new one for each subscription payload). */
function textsOf(ctx: Context, info: Pick<GraphQLResolveInfo, 'rootValue'>): RequestTexts {
  const texts = ctx.texts;
  if (texts && texts.root === info.rootValue) return texts;
  return (ctx.texts = { root: info.rootValue, budget: new TextBudget(ctx.store.log.pageBytes), read: new Map() });
}

export const textBudgetOf = (ctx: Context, info: Pick<GraphQLResolveInfo, 'rootValue'>): TextBudget => textsOf(ctx, info).budget;

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
  const texts = textsOf(ctx, info);
  let shown = texts.read.get(owner);
  if (!shown) texts.read.set(owner, (shown = new Map()));
  let held = shown.get(text);
  if (!held) shown.set(text, (held = read(texts.budget).then((t) => t ?? null)));
  return held;
}

/**
 * The text `key` of event `seq` of `log` that `owner` shows, `length` characters long (StoredEvent.textLength, read
 * with the event: then one statement), read once per request within its budget and its statement scope.
 */
export const eventText = (
  ctx: Context,
  info: GraphQLResolveInfo,
  owner: object,
  event: { log: LogRef; seq: number; key: TextKey; length?: number | null },
): Promise<BoundedText> =>
  requestText(ctx, info, owner, event.key, (budget) => scopedReads(ctx).log.textWithin(event.log, event.seq, event.key, budget, event.length)).then(
    (t) => t ?? NO_TEXT,
  );
