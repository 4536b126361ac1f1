// What a client may send, the same at every door (GraphQL over HTTP and
// WebSocket, POST /agui, POST /recordings): bodies and messages are strict
// UTF-8 (an invalid byte is refused, never stored as U+FFFD), text is storable
// (storable.ts: no NUL, no lone surrogate) and within its length limit, and an
// id a client names or chooses is 1–200 characters of it. Each door maps a
// refusal to its own shape (400, BAD_USER_INPUT, WebSocket close 1007). Pure.
import { z } from 'zod';
import { badInput } from './errors.ts';
import { isStorableText } from './storable.ts';

import {
  MAX_APPROVAL_REASON_CHARS,
  MAX_ID_CHARS,
  MAX_INSTRUCTIONS_CHARS,
  MAX_MESSAGE_CHARS,
  MAX_MODEL_NAME_CHARS,
  MAX_PROVIDER_NAME_CHARS,
  MAX_TITLE_CHARS,
} from './text-limits.ts';

export { MAX_ID_CHARS, MAX_INSTRUCTIONS_CHARS, MAX_MESSAGE_CHARS, MAX_TITLE_CHARS };

export const UNSTORABLE_TEXT = 'must be well-formed Unicode without NUL characters (U+0000)';
const storable = (s: z.ZodString) => s.refine(isStorableText, UNSTORABLE_TEXT);

/** An id a client names (a session, an input) or chooses (an idempotency key, AG-UI thread, run and message ids). */
export const idSchema = storable(z.string().min(1).max(MAX_ID_CHARS));
export const titleSchema = storable(z.string().max(MAX_TITLE_CHARS));
export const messageTextSchema = storable(z.string().min(1).max(MAX_MESSAGE_CHARS));
/** A session's instructions (its system prompt); empty: none. */
export const instructionsSchema = storable(z.string().max(MAX_INSTRUCTIONS_CHARS));
/** The reason given with a tool call's approval or denial; empty: none. */
export const approvalReasonSchema = storable(z.string().max(MAX_APPROVAL_REASON_CHARS));
/**
 * A model's name and its provider's, at every door that takes one (GraphQL's ModelConfigInput, a session/model event
 * from a recording or a runner's appendEvents, in any format version: core/events.ts): bounded, so a list of sessions
 * or a fan-out's cards cannot be made to carry megabytes of names.
 */
export const modelNameSchema = z
  .string()
  .min(1, 'a model name may not be empty')
  .max(MAX_MODEL_NAME_CHARS, `a model name is at most ${MAX_MODEL_NAME_CHARS} characters`);
export const providerNameSchema = z
  .string()
  .min(1, 'a provider name may not be empty')
  .max(MAX_PROVIDER_NAME_CHARS, `a provider name is at most ${MAX_PROVIDER_NAME_CHARS} characters`);
/** An external runner pool's name: letters, digits and . _ : - */
export const runnerPoolSchema = z
  .string()
  .min(1)
  .max(100)
  .regex(/^[A-Za-z0-9._:-]+$/, 'a runner pool is 1-100 letters, digits, ".", "_", ":" or "-"');

/**
 * Parses `value`, or throws BAD_USER_INPUT naming each failing path (`label` names the whole value; `at`: where the
 * value is in what the client sent, e.g. `messages.3` for one message of a list parsed on its own).
 */
export function parseInput<T extends z.ZodType>(schema: T, value: unknown, label = 'input', at: PropertyKey[] = []): z.infer<T> {
  const r = schema.safeParse(value);
  if (!r.success) throw badInput(r.error.issues.map((i) => `${[...at, ...i.path].map(String).join('.') || label}: ${i.message}`).join('; '));
  return r.data;
}

export const INVALID_UTF8 = 'is not valid UTF-8 (invalid bytes are refused, not replaced)';
const utf8 = new TextDecoder('utf-8', { fatal: true });

/** The text of strict UTF-8 bytes, or undefined when they are not UTF-8. */
export function decodeUtf8(bytes: Uint8Array): string | undefined {
  try {
    return utf8.decode(bytes);
  } catch {
    return undefined;
  }
}
