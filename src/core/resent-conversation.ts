// The conversation a chat client resends with every request: useChat's
// transport sends all of its messages each time, as AG-UI's RunAgentInput
// does, while forkline keeps the history in the session's log and uses one or
// two of them (docs/api.md "useChat", docs/agui.md). So a door counts a
// request's messages, finds the ones it uses without parsing the others, and
// parses only those, each within MAX_MESSAGE_PARTS: what a request costs
// grows with what is used, not with the history (docs/operations.md
// "Event-loop time"). Pure.
import { z } from 'zod';

/** Messages (and entries of each other list) one /chat or /agui request may carry unless configured (FORKLINE_MAX_REQUEST_MESSAGES). */
export const DEFAULT_MAX_REQUEST_MESSAGES = 10_000;
/** The most parts (content entries) a message a door uses may hold: each of them is parsed. */
export const MAX_MESSAGE_PARTS = 10_000;

/**
 * JSON values one /chat or /agui body may hold unless configured (FORKLINE_MAX_REQUEST_VALUES), counted on its text
 * before it is parsed, as every door's MAX_JSON_VALUES (core/storable.ts): JSON.parse's time, which the event loop
 * waits for, grows with them — up to 0.2 µs each unloaded (a short string, or an array nested in another), 1.4 MB of
 * arrays nested 240 deep or 8 deep alike. useChat's chat of 2,000 messages with tool parts holds 36,000
 * (tests/chat/chat.test.ts counts its body), so 10,000 such messages (FORKLINE_MAX_REQUEST_MESSAGES) about 180,000
 * (docs/operations.md "Event-loop time").
 */
export const DEFAULT_MAX_REQUEST_VALUES = 250_000;
/**
 * Distinct object keys one /chat or /agui body may hold unless configured (FORKLINE_MAX_REQUEST_KEYS), counted in the
 * same scan: JSON.parse pays 2–3.5 µs for each new key (a property name and a hidden class), a few hundred times a
 * value's, so 250,000 of them took 0.5–0.9 s. A chat's messages and parts repeat a few dozen keys; a tool's output
 * adds its own.
 */
export const DEFAULT_MAX_REQUEST_KEYS = 10_000;
/** What a chat door's body past one of its bounds is told after its reason (core/storable.ts jsonTextRefusal). */
export const chatBodyAdvice = (past: 'values' | 'keys') =>
  `past FORKLINE_MAX_REQUEST_${past.toUpperCase()}: the session keeps the conversation, so send only its last message`;

/** A request carrying more messages, or entries of another of its lists, than one may (413, naming the limit). */
export class TooManyEntries extends Error {
  constructor(list: string, count: number, max: number) {
    super(list === 'messages' ? tooManyMessages(count, max) : tooManyEntries(list, count, max));
    this.name = 'TooManyEntries';
  }
}
export const tooManyMessages = (count: number, max: number) =>
  `the request carries ${count} messages, more than the ${max} one request may carry (FORKLINE_MAX_REQUEST_MESSAGES): ` +
  'the session keeps the conversation, so send only its last message';
export const tooManyEntries = (list: string, count: number, max: number) =>
  `the request's ${list} holds ${count} entries, more than the ${max} each list of one request may hold (FORKLINE_MAX_REQUEST_MESSAGES)`;

/**
 * Throws TooManyEntries when one of a parsed body's `lists` (its own fields) is a list of more than `max`, in the
 * order given (any other shape: its schema answers). Counted before any schema walks them.
 */
export function countLists(body: unknown, max: number, lists: readonly string[] = ['messages']): void {
  if (typeof body !== 'object' || body === null) return;
  for (const list of lists) {
    const entries = ownField(body, list);
    if (Array.isArray(entries) && entries.length > max) throw new TooManyEntries(list, entries.length, max);
  }
}

/** A list of at most `max` items, each parsed by `item`: past `max` it is refused before any item is parsed. */
export const boundedList = <T extends z.ZodType>(item: T, max = MAX_MESSAGE_PARTS) => z.array(z.unknown()).max(max).pipe(z.array(item));

/** A message's own field, read without parsing it (a message that is not an object has none). */
const ownField = (message: unknown, field: string): unknown =>
  typeof message === 'object' && message !== null && Object.hasOwn(message, field) ? (message as Record<string, unknown>)[field] : undefined;

/** The index of the last message whose role is `role` (-1 when none), read without parsing any. */
export function lastIndexOfRole(messages: readonly unknown[], role: string): number {
  for (let i = messages.length - 1; i >= 0; i--) if (ownField(messages[i], 'role') === role) return i;
  return -1;
}

/** The index of the message whose id is `id` (-1 when none), read without parsing any. */
export const indexOfId = (messages: readonly unknown[], id: string): number => messages.findIndex((m) => ownField(m, 'id') === id);
