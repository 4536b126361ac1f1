// The conversation a chat client resends with every request: useChat's
// transport sends all of its messages each time, as AG-UI's RunAgentInput
// does, while forkline keeps the history in the session's log and uses one or
// two of them (docs/api.md "useChat", docs/agui.md). So a door counts a
// request's messages, finds the ones it uses without parsing the others, and
// parses only those, each within MAX_MESSAGE_PARTS: what a request costs
// grows with what is used, not with the history (docs/operations.md
// "Event-loop time"). Pure.
import { z } from 'zod';

/** Messages one /chat or /agui request may carry unless configured (FORKLINE_MAX_REQUEST_MESSAGES). */
export const DEFAULT_MAX_REQUEST_MESSAGES = 10_000;
/** The most parts (content entries) a message a door uses may hold: each of them is parsed. */
export const MAX_MESSAGE_PARTS = 10_000;

/** A request carrying more messages than one may (413, naming the limit and what to send instead). */
export class TooManyMessages extends Error {
  constructor(count: number, max: number) {
    super(tooManyMessages(count, max));
    this.name = 'TooManyMessages';
  }
}
export const tooManyMessages = (count: number, max: number) =>
  `the request carries ${count} messages, more than the ${max} one request may carry (FORKLINE_MAX_REQUEST_MESSAGES): ` +
  'the session keeps the conversation, so send only its last message';

/** Throws TooManyMessages when a parsed body's `messages` is a list of more than `max` (any other shape: its schema answers). */
export function countMessages(body: unknown, max: number): void {
  const messages = typeof body === 'object' && body !== null ? (body as { messages?: unknown }).messages : undefined;
  if (Array.isArray(messages) && messages.length > max) throw new TooManyMessages(messages.length, max);
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
