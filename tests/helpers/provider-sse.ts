// Model providers' answers as their servers stream them (server-sent events),
// for the fake providers of the security tests.

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
