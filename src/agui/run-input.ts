// What POST /agui takes from a RunAgentInput (docs/agui.md): the thread, the
// run, the run it branches from, the resume entries, and the last user
// message's text. Client tools, context, state and forwardedProps are ignored,
// and the other messages are the thread's history, which the session holds:
// they are counted, not parsed (core/resent-conversation.ts). Each list —
// messages, tools, context, resume — is held to the same count before any
// schema walks it.
import { z } from 'zod';
import { ContentPartSchema, RunAgentInputSchema, UserMessageSchema } from '@ag-ui/core/schemas';
import { badInput } from '../core/errors.ts';
import { approvalReasonSchema, idSchema, messageTextSchema, parseInput } from '../core/input-rules.ts';
import { boundedList, countLists, lastIndexOfRole } from '../core/resent-conversation.ts';

/** The protocol's RunAgentInput, its lists not walked but the resume entries (which are used). */
const envelopeSchema = RunAgentInputSchema.extend({
  messages: z.array(z.unknown()),
  tools: z.array(z.unknown()).optional(),
  context: z.array(z.unknown()).optional(),
});
/** The protocol's user message, its content parts parsed apart (partsSchema). */
const userMessageSchema = UserMessageSchema.extend({ content: z.union([z.string(), z.array(z.unknown())]) });
/** A user message's content parts, within MAX_MESSAGE_PARTS (past it, refused before any is parsed). */
const partsSchema = boundedList(ContentPartSchema);

/** The ids a run names or chooses, under the id rule of every door (the message's text is checked apart). */
const runIdsSchema = z.object({ threadId: idSchema, runId: idSchema, parentRunId: idSchema.optional() });

/**
 * A resume entry's answer to a tool approval interrupt (agui-events.ts APPROVAL_RESPONSE_SCHEMA), under the input rules
 * of every door: `resolved` answers `{approved, reason?}`; `cancelled` denies, its payload, if any, giving the reason.
 * A payload that is not one is refused with the request (it was taken as a denial, a 1 MB reason as one without reason).
 */
const resumeEntrySchema = z.discriminatedUnion('status', [
  z.object({ interruptId: idSchema, status: z.literal('resolved'), payload: z.object({ approved: z.boolean(), reason: approvalReasonSchema.optional() }) }),
  z.object({ interruptId: idSchema, status: z.literal('cancelled'), payload: z.object({ reason: approvalReasonSchema.optional() }).optional() }),
]);

/** A resume entry as a decision on the call its interrupt names. */
export interface ResumeDecision {
  interruptId: string;
  approved: boolean;
  reason: string;
}

const CANCELLED_REASON = 'the client cancelled the interrupt';

export interface RunRequest {
  threadId: string;
  runId: string;
  parentRunId?: string;
  resume?: ResumeDecision[];
  /** The last user message's text (text parts joined by newlines); undefined when the input holds none. */
  text?: string;
}

/** RunAgentInput's lists, counted in this order (the messages first: their refusal says what to send instead). */
const RUN_INPUT_LISTS = ['messages', 'tools', 'context', 'resume'] as const;

/**
 * The run a parsed body asks for: TooManyEntries past `maxMessages` entries in any of its lists; BAD_USER_INPUT when it is not a
 * RunAgentInput ("not an AG-UI RunAgentInput: <path>: …") or breaks the input rules of every door ("<path>: …").
 * Only the last user message is parsed: a malformed message elsewhere in the history is not read.
 */
export function runRequestOf(body: unknown, maxMessages: number): RunRequest {
  countLists(body, maxMessages, RUN_INPUT_LISTS);
  const input = protocol(envelopeSchema, body);
  const at = lastIndexOfRole(input.messages, 'user');
  const user = at < 0 ? undefined : protocol(userMessageSchema, input.messages[at], ['messages', at]);
  const content = typeof user?.content === 'object' ? protocol(partsSchema, user.content, ['messages', at, 'content']) : user?.content;
  parseInput(runIdsSchema, input);
  if (user) parseInput(idSchema, user.id, 'the message id', ['messages', at, 'id']);
  const text = typeof content === 'object' ? content.flatMap((p) => (p.type === 'text' ? [p.text] : [])).join('\n') : content;
  if (text !== undefined) parseInput(messageTextSchema, text, 'the last user message');
  const resume = input.resume?.map((entry, i) => {
    const e = parseInput(resumeEntrySchema, entry, 'the resume entry', ['resume', i]);
    return e.status === 'resolved'
      ? { interruptId: e.interruptId, approved: e.payload.approved, reason: e.payload.reason ?? '' }
      : { interruptId: e.interruptId, approved: false, reason: e.payload?.reason ?? CANCELLED_REASON };
  });
  return { threadId: input.threadId, runId: input.runId, parentRunId: input.parentRunId, resume, text };
}

/** Parses what the protocol defines, or throws BAD_USER_INPUT naming each failing path. */
function protocol<T extends z.ZodType>(schema: T, value: unknown, at: PropertyKey[] = []): z.infer<T> {
  const parsed = schema.safeParse(value);
  if (parsed.success) return parsed.data;
  const issues = parsed.error.issues.map((i) => `${[...at, ...i.path].map(String).join('.')}: ${i.message}`);
  throw badInput(`not an AG-UI RunAgentInput: ${issues.join('; ')}`);
}
