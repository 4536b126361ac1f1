// Model providers' answers as their servers stream them (server-sent events),
// for the fake providers of the security tests and the adapters' tests.
import type { ServerResponse } from 'node:http';

/** One SSE event; `data` as JSON unless it is text already. */
export const sse = (data: unknown, event?: string) => `${event ? `event: ${event}\n` : ''}data: ${typeof data === 'string' ? data : JSON.stringify(data)}\n\n`;

/** Anthropic's first event of an answer (its message, reporting 5 input tokens). */
export const anthropicStart = sse(
  {
    type: 'message_start',
    message: {
      id: 'msg_1',
      type: 'message',
      role: 'assistant',
      model: 'fake-model',
      content: [],
      stop_reason: null,
      usage: { input_tokens: 5, output_tokens: 1 },
    },
  },
  'message_start',
);

/** A whole Anthropic answer of one text block. */
export const anthropicText = (text: string) =>
  anthropicStart +
  sse({ type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } }, 'content_block_start') +
  sse({ type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text } }, 'content_block_delta') +
  sse({ type: 'content_block_stop', index: 0 }, 'content_block_stop') +
  sse({ type: 'message_delta', delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 1 } }, 'message_delta') +
  sse({ type: 'message_stop' }, 'message_stop');

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
