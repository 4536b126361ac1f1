// Model providers' answers as their servers stream them (server-sent events),
// for the fake providers of the provider and security tests: OpenAI chat
// completions (and OpenAI-compatible servers), OpenAI Responses, Anthropic
// messages and Gemini generateContent. An answer is its events' texts, in
// order: a fake server writes them apart or joined.
import type { ServerResponse } from 'node:http';

/** One SSE event; `data` as JSON unless it is text already. */
export const sse = (data: unknown, event?: string) => `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

/** Token counts as a provider reports them. */
export interface WireUsage {
  input: number;
  output: number;
}

/** A tool call as the model makes it: `arguments` is sent in two deltas where the format streams them. */
export interface WireCall {
  id: string;
  name: string;
  arguments: string;
}

/** What a tool call's answer reports when the test names no usage. */
const CALL_USAGE: WireUsage = { input: 20, output: 7 };

// ---- OpenAI chat completions ----

/** One chunk of a chat completions stream. */
export const chatChunk = (delta: unknown, finish: string | null = null, extra: Record<string, unknown> = {}) => ({
  id: 'chatcmpl-1',
  object: 'chat.completion.chunk',
  created: 1,
  model: 'fake-model',
  choices: [{ index: 0, delta, finish_reason: finish }],
  ...extra,
});

const chatEnd = (reason: string, usage?: WireUsage) =>
  sse(chatChunk({}, reason, usage ? { usage: { prompt_tokens: usage.input, completion_tokens: usage.output, total_tokens: usage.input + usage.output } } : {}));

/** A chat completions answer of these text deltas. */
export const chatText = (chunks: string[], usage: WireUsage): string[] => [
  sse(chatChunk({ role: 'assistant', content: '' })),
  ...chunks.map((content) => sse(chatChunk({ content }))),
  chatEnd('stop', usage),
  sse('[DONE]'),
];

/** A chat completions answer making one tool call. */
export const chatToolCall = (c: WireCall): string[] => [
  sse(chatChunk({ role: 'assistant', tool_calls: [{ index: 0, id: c.id, type: 'function', function: { name: c.name, arguments: '' } }] })),
  sse(chatChunk({ tool_calls: [{ index: 0, function: { arguments: c.arguments.slice(0, 5) } }] })),
  sse(chatChunk({ tool_calls: [{ index: 0, function: { arguments: c.arguments.slice(5) } }] })),
  chatEnd('tool_calls', CALL_USAGE),
  sse('[DONE]'),
];

// ---- OpenAI Responses ----

const responseCreated = (id: string) => sse({ type: 'response.created', response: { id, created_at: 1, model: 'fake-model' } });
const responseCompleted = (id: string, usage: WireUsage) =>
  sse({
    type: 'response.completed',
    response: { id, created_at: 1, model: 'fake-model', status: 'completed', usage: { input_tokens: usage.input, output_tokens: usage.output } },
  });

/** A Responses answer: one message of these text deltas. */
export const responsesText = (chunks: string[], usage: WireUsage): string[] => [
  responseCreated('resp_1'),
  sse({ type: 'response.output_item.added', output_index: 0, item: { type: 'message', id: 'msg_1' } }),
  ...chunks.map((delta) => sse({ type: 'response.output_text.delta', item_id: 'msg_1', delta })),
  sse({ type: 'response.output_item.done', output_index: 0, item: { type: 'message', id: 'msg_1' } }),
  responseCompleted('resp_1', usage),
];

/** A Responses answer making one function call. */
export const responsesToolCall = (c: WireCall): string[] => [
  responseCreated('resp_2'),
  sse({ type: 'response.output_item.added', output_index: 0, item: { type: 'function_call', id: 'fc_1', call_id: c.id, name: c.name, arguments: '' } }),
  sse({ type: 'response.function_call_arguments.delta', item_id: 'fc_1', output_index: 0, delta: c.arguments }),
  sse({
    type: 'response.output_item.done',
    output_index: 0,
    item: { type: 'function_call', id: 'fc_1', call_id: c.id, name: c.name, arguments: c.arguments, status: 'completed' },
  }),
  responseCompleted('resp_2', CALL_USAGE),
];

// ---- Anthropic messages ----

/** Anthropic's first event of an answer: its message, reporting `inputTokens`. */
export const anthropicStart = (inputTokens = 5, id = 'msg_1') =>
  sse(
    {
      type: 'message_start',
      message: {
        id,
        type: 'message',
        role: 'assistant',
        model: 'fake-model',
        content: [],
        stop_reason: null,
        usage: { input_tokens: inputTokens, output_tokens: 1 },
      },
    },
    'message_start',
  );

/** Anthropic's last events: why the answer stopped, its output tokens, the end. */
export const anthropicStop = (reason: 'end_turn' | 'tool_use', outputTokens: number) => [
  sse({ type: 'message_delta', delta: { stop_reason: reason, stop_sequence: null }, usage: { output_tokens: outputTokens } }, 'message_delta'),
  sse({ type: 'message_stop' }, 'message_stop'),
];

/** An Anthropic answer of one text block of these deltas. */
export const anthropicText = (chunks: string[], usage: WireUsage = { input: 5, output: 1 }): string[] => [
  anthropicStart(usage.input),
  sse({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start'),
  ...chunks.map((text) => sse({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }, 'content_block_delta')),
  sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
  ...anthropicStop('end_turn', usage.output),
];

/** An Anthropic answer making one tool call. */
export const anthropicToolCall = (c: WireCall): string[] => [
  anthropicStart(CALL_USAGE.input, 'msg_2'),
  sse({ type: 'content_block_start', index: 0, content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} } }, 'content_block_start'),
  sse({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: c.arguments.slice(0, 5) } }, 'content_block_delta'),
  sse({ type: 'content_block_delta', index: 0, delta: { type: 'input_json_delta', partial_json: c.arguments.slice(5) } }, 'content_block_delta'),
  sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop'),
  ...anthropicStop('tool_use', CALL_USAGE.output),
];

/**
 * The answer Anthropic gives a request without `stream`: one JSON message (the Messages API's response: its
 * content blocks whole, a tool_use's `input` as an object, `stop_reason` and `usage`), assembled from the events
 * it streams for the same answer.
 */
export function anthropicMessage(events: string[]): Record<string, unknown> {
  let message: Record<string, unknown> = {};
  const content: Array<Record<string, any>> = [];
  const inputs: string[] = [];
  for (const event of events) {
    const data = JSON.parse(event.slice(event.indexOf('data: ') + 'data: '.length));
    if (data.type === 'message_start') message = { ...data.message };
    else if (data.type === 'content_block_start') [content[data.index], inputs[data.index]] = [{ ...data.content_block }, ''];
    else if (data.type === 'content_block_delta' && data.delta.type === 'text_delta') content[data.index].text += data.delta.text;
    else if (data.type === 'content_block_delta' && data.delta.type === 'input_json_delta') inputs[data.index] += data.delta.partial_json;
    else if (data.type === 'content_block_stop' && content[data.index].type === 'tool_use') content[data.index].input = JSON.parse(inputs[data.index] || '{}');
    else if (data.type === 'message_delta')
      message = {
        ...message,
        stop_reason: data.delta.stop_reason,
        stop_sequence: data.delta.stop_sequence ?? null,
        usage: { ...(message.usage as object), ...data.usage },
      };
  }
  return { ...message, content };
}

// ---- Gemini generateContent ----

const geminiUsage = (u: WireUsage) => ({ usageMetadata: { promptTokenCount: u.input, candidatesTokenCount: u.output, totalTokenCount: u.input + u.output } });

/** A Gemini answer of these text parts, one event each; the last one says STOP and counts the tokens. */
export const geminiText = (chunks: string[], usage: WireUsage): string[] =>
  chunks.map((text, i) =>
    sse({
      candidates: [{ content: { role: 'model', parts: [{ text }] }, ...(i === chunks.length - 1 ? { finishReason: 'STOP' } : {}) }],
      ...(i === chunks.length - 1 ? geminiUsage(usage) : {}),
    }),
  );

/** A Gemini answer making one function call (its arguments whole: the format streams none). */
export const geminiToolCall = (c: WireCall): string[] => [
  sse({
    candidates: [{ content: { role: 'model', parts: [{ functionCall: { name: c.name, args: JSON.parse(c.arguments) } }] }, finishReason: 'STOP' }],
    ...geminiUsage(CALL_USAGE),
  }),
];

/** A fake Chat Completions answer (OpenAI's wire format): the calls, else the text; JSON, or server-sent chunks when the request asked `stream`. */
export function chatCompletionsAnswer(
  res: ServerResponse,
  request: { stream?: boolean },
  answer: { id: string; calls: Array<{ index: number; id: string; type: string; function: { name: string; arguments: string } }>; text: string },
): void {
  const { calls, text } = answer;
  const finish = calls.length ? 'tool_calls' : 'stop';
  const base = { id: answer.id, created: 1, model: 'fake-model' };
  const usage = { prompt_tokens: 10, completion_tokens: 5, total_tokens: 15 };
  if (!request.stream) {
    res.writeHead(200, { 'content-type': 'application/json' });
    const message = { role: 'assistant', content: calls.length ? null : text, ...(calls.length ? { tool_calls: calls } : {}) };
    res.end(JSON.stringify({ ...base, object: 'chat.completion', choices: [{ index: 0, message, finish_reason: finish }], usage }));
    return;
  }
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const chunk = (choices: unknown[], extra: Record<string, unknown> = {}) => res.write(sse({ ...base, object: 'chat.completion.chunk', choices, ...extra }));
  chunk([{ index: 0, delta: calls.length ? { role: 'assistant', tool_calls: calls } : { role: 'assistant', content: text }, finish_reason: null }]);
  chunk([{ index: 0, delta: {}, finish_reason: finish }]);
  chunk([], { usage });
  res.end('data: [DONE]\n\n');
}
