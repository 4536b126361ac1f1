// What POST /chat takes from a useChat request (docs/api.md "useChat"): the
// chat id, the trigger, the last user message's id and text, and the approval
// responses of the message it continues. DefaultChatTransport sends the whole
// conversation every time while the session holds it, so the other messages
// are counted, not parsed (core/resent-conversation.ts).
import { z } from 'zod';
import { approvalReasonSchema, idSchema, parseInput } from '../core/input-rules.ts';
import { boundedList, countLists, indexOfId, lastIndexOfRole } from '../core/resent-conversation.ts';

/** What the default transport sends around its messages. */
const envelopeSchema = z.object({
  id: idSchema,
  messages: z.array(z.unknown()),
  trigger: z.enum(['submit-message', 'regenerate-message']).default('submit-message'),
  messageId: z.string().max(200).optional(),
});

/** A message the door uses; parts other than text and answered approvals (files, tools) are not read. */
const messageSchema = z.object({
  id: z.string().max(200).optional(),
  role: z.enum(['system', 'user', 'assistant']),
  parts: boundedList(
    z.object({
      type: z.string(),
      text: z.string().optional(),
      // A tool part the user answered (addToolApprovalResponse): its approval, which names the call, and the reason
      // given, under the rules of every door (core/input-rules.ts): refused here, before anything is read or decided.
      state: z.string().optional(),
      approval: z.object({ id: idSchema, approved: z.boolean().optional(), reason: approvalReasonSchema.optional() }).optional(),
    }),
  ),
});
type ChatMessage = z.infer<typeof messageSchema>;

export interface ApprovalResponse {
  callId: string;
  approved: boolean;
  reason?: string;
}

export interface ChatRequest {
  chatId: string;
  trigger: 'submit-message' | 'regenerate-message';
  messageId?: string;
  /** The last user message: its id (the send's idempotency key) and its text parts joined by newlines ('' when none). */
  lastUser?: { id?: string; text: string };
  /** The `approval-responded` tool parts of the message a new request continues (messageId's, else the last). */
  responses: ApprovalResponse[];
}

/**
 * The chat request a parsed body holds: TooManyEntries past `maxMessages`, BAD_USER_INPUT when it is not one.
 * Only the messages used are parsed: a malformed message elsewhere in the history is not read.
 */
export function chatRequestOf(body: unknown, maxMessages: number): ChatRequest {
  countLists(body, maxMessages);
  const input = parseInput(envelopeSchema, body, 'the chat request');
  const { messages } = input;
  const messageAt = (index: number) => parseInput(messageSchema, messages[index], 'the message', ['messages', index]);
  const continued = input.trigger !== 'submit-message' ? -1 : input.messageId ? indexOfId(messages, input.messageId) : messages.length - 1;
  const userAt = lastIndexOfRole(messages, 'user');
  const user = userAt < 0 ? undefined : messageAt(userAt);
  return {
    chatId: input.id,
    trigger: input.trigger,
    messageId: input.messageId,
    lastUser: user && {
      id: user.id,
      text: user.parts
        .filter((p) => p.type === 'text' && typeof p.text === 'string')
        .map((p) => p.text)
        .join('\n'),
    },
    responses: continued < 0 ? [] : approvalResponses(continued === userAt ? user! : messageAt(continued)),
  };
}

/** An assistant message's answered approvals. */
function approvalResponses(message: ChatMessage): ApprovalResponse[] {
  if (message.role !== 'assistant') return [];
  return message.parts.flatMap((p) =>
    p.state === 'approval-responded' && p.approval && typeof p.approval.approved === 'boolean'
      ? [{ callId: p.approval.id, approved: p.approval.approved, reason: p.approval.reason }]
      : [],
  );
}
