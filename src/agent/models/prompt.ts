// The agent's conversation (OpenAI chat shape, core/chat.ts) as the AI SDK's
// messages. Pure.
//
// The target is the language-model prompt (LanguageModelV3Prompt): the AI SDK's
// ModelMessage format in its normal form (content always an array of parts),
// which is what every provider's model, and the scripted one, is given. The
// adapter hands it to the model directly rather than through streamText, which
// validates and converts the whole conversation again on every step: a cost
// that grows with the conversation, where this one grows with the new messages.
//
// A conversation's requests share their message objects (core/model-request.ts),
// so each message is converted once and the same object is handed out again:
// a step costs the new messages, and models may keep running totals with them
// (the scripted model does).
import type { LanguageModelV3FunctionTool, LanguageModelV3Message, LanguageModelV3Prompt, LanguageModelV3ToolCallPart } from '@ai-sdk/provider';
import { TOOL_ERROR_PREFIX, type ChatMessage, type ToolDefinition } from '../../core/chat.ts';
import { MAX_JSON_DEPTH } from '../../core/storable.ts';
import { wireToolName } from '../../core/wire-names.ts';

export interface PromptOptions {
  /**
   * System messages only before the first other message (Google's API takes no
   * other; a compaction's summary may stand later): a later one is sent as a
   * user message with the same text.
   */
  systemOnlyAtStart?: boolean;
  /**
   * The results of one step's calls in one message (Gemini pairs a turn of
   * calls with the one turn after it, part for part: "the number of function
   * response parts is equal to the number of function call parts"; the SDK
   * makes a turn of each tool message).
   */
  resultsTogether?: boolean;
}

const converted = new WeakMap<ChatMessage, LanguageModelV3Message>();
/**
 * Only a request's last messages are kept in `converted` (those a next request
 * may send again outside the prefix it continues: an assistant message drawn
 * again with its answered calls is followed by the ones after it). A cold
 * start's whole history is kept with the prompt in `previous` instead of
 * hundreds of thousands of entries of its own.
 */
const CONVERTED_KEPT = 1000;

/**
 * The last request of each conversation, by its last message: the next one
 * starts with the same message objects (verified one by one), so its prompt
 * starts with the same converted ones, copied, and only the rest is looked up.
 * One entry per conversation (the previous one is dropped as the next is kept).
 */
const previous = new WeakMap<ChatMessage, { messages: readonly ChatMessage[]; prompt: LanguageModelV3Prompt; systemOnlyAtStart: boolean }>();

export function toPrompt(messages: readonly ChatMessage[], opts: PromptOptions = {}): LanguageModelV3Prompt {
  const systemOnlyAtStart = opts.systemOnlyAtStart ?? false;
  let firstOther = 0;
  while (firstOther < messages.length && messages[firstOther].role === 'system') firstOther++;
  // The request this one continues: found from the end (what is new has no entry), then checked from the start.
  let reused = 0;
  let out: LanguageModelV3Prompt = [];
  for (let i = messages.length - 1; i >= 0; i--) {
    const prior = previous.get(messages[i]);
    if (prior?.messages.length !== i + 1 || prior.systemOnlyAtStart !== systemOnlyAtStart) continue;
    while (reused <= i && prior.messages[reused] === messages[reused]) reused++;
    out = prior.prompt.slice(0, reused);
    previous.delete(messages[i]);
    break;
  }
  for (let i = reused; i < messages.length; i++) {
    const m = messages[i];
    if (m.role === 'system' && i > firstOther && systemOnlyAtStart) {
      out.push({ role: 'user', content: [{ type: 'text', text: m.content }] });
      continue;
    }
    let c = converted.get(m);
    if (!c) {
      c = convert(messages, i);
      if (i >= messages.length - CONVERTED_KEPT) converted.set(m, c);
    }
    out.push(c);
  }
  if (messages.length) previous.set(messages[messages.length - 1], { messages, prompt: out, systemOnlyAtStart });
  return opts.resultsTogether ? resultsTogether(out) : out;
}

type ToolMessage = Extract<LanguageModelV3Message, { role: 'tool' }>;

/** Runs of tool messages made one, by the run's first and last message (a step's results, once it has them all). */
const joined = new WeakMap<LanguageModelV3Message, { last: LanguageModelV3Message; message: ToolMessage }>();

/** A prompt whose consecutive tool messages are one message each (`resultsTogether`); the prompt itself when none are. */
function resultsTogether(prompt: LanguageModelV3Prompt): LanguageModelV3Prompt {
  let out: LanguageModelV3Prompt | undefined;
  for (let i = 0; i < prompt.length;) {
    let j = i + 1;
    if (prompt[i].role === 'tool') while (j < prompt.length && prompt[j].role === 'tool') j++;
    if (j - i === 1) {
      out?.push(prompt[i]);
    } else {
      out ??= prompt.slice(0, i);
      let run = joined.get(prompt[i]);
      if (run?.last !== prompt[j - 1]) {
        run = { last: prompt[j - 1], message: { role: 'tool', content: prompt.slice(i, j).flatMap((m) => (m as ToolMessage).content) } };
        joined.set(prompt[i], run);
      }
      out.push(run.message);
    }
    i = j;
  }
  return out ?? prompt;
}

function convert(messages: readonly ChatMessage[], i: number): LanguageModelV3Message {
  const m = messages[i];
  switch (m.role) {
    case 'system':
      return { role: 'system', content: m.content };
    case 'user':
      return { role: 'user', content: [{ type: 'text', text: m.content }] };
    case 'assistant':
      return {
        role: 'assistant',
        content: [
          ...(m.content !== null ? [{ type: 'text' as const, text: m.content }] : []),
          ...(m.tool_calls ?? []).map((c): LanguageModelV3ToolCallPart => ({
            type: 'tool-call',
            toolCallId: c.id,
            // Ids are wire ids already (the conversation sends them so); names as the tools were offered (core/wire-names.ts).
            toolName: wireToolName(c.function.name),
            input: toolInput(c.function.arguments),
          })),
        ],
      };
    case 'tool': {
      const error = m.content.startsWith(TOOL_ERROR_PREFIX);
      return {
        role: 'tool',
        content: [
          {
            type: 'tool-result',
            toolCallId: m.tool_call_id,
            toolName: wireToolName(toolNameOf(messages, i, m.tool_call_id)),
            // The whole text either way: what the model reads does not change with the provider.
            output: error ? { type: 'error-text', value: m.content } : { type: 'text', value: m.content },
          },
        ],
      };
    }
  }
}

/**
 * A call's input as the SDK takes it (a JSON object; providers serialize it
 * again). Arguments that are not a JSON object (a model's malformed call, whose
 * result already says so) are sent as an empty object: providers such as
 * Anthropic refuse anything else; so are arguments nested deeper than the log
 * holds JSON (the SDK serializes them recursively: 100,000 levels overflowed
 * its stack and failed every later step of the session).
 */
export function toolInput(args: string): Record<string, unknown> {
  try {
    const v: unknown = JSON.parse(args || '{}');
    return v !== null && typeof v === 'object' && !Array.isArray(v) && !nestedDeeper(v, MAX_JSON_DEPTH) ? (v as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** Whether a parsed JSON value nests deeper than `max` levels; iterative, so no depth overflows it. */
function nestedDeeper(value: unknown, max: number): boolean {
  const stack: Array<[unknown, number]> = [[value, 0]];
  while (stack.length) {
    const [v, depth] = stack.pop()!;
    if (!v || typeof v !== 'object') continue;
    if (depth >= max) return true;
    for (const x of Object.values(v)) stack.push([x, depth + 1]);
  }
  return false;
}

/** The name of the tool a result answers: from the assistant message that made the call (the nearest one before it). */
function toolNameOf(messages: readonly ChatMessage[], i: number, callId: string): string {
  for (let j = i - 1; j >= 0; j--) {
    const m = messages[j];
    const call = m.role === 'assistant' ? m.tool_calls?.find((c) => c.id === callId) : undefined;
    if (call) return call.function.name;
  }
  return 'unknown';
}

/** The tools a request offers, under their wire names (core/wire-names.ts: the adapter reads its answer's names back). */
export function toTools(tools: readonly ToolDefinition[]): LanguageModelV3FunctionTool[] {
  return tools.map((t) => ({ type: 'function', name: wireToolName(t.name), description: t.description, inputSchema: t.parameters }));
}
