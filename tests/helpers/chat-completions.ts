// A fake model provider speaking the Chat Completions wire format, for tests
// of the runner adapters with the frameworks' own OpenAI model packages: the
// test decides each answer from the request; the server answers as OpenAI's
// does (JSON, or server-sent chunks when `stream` was asked).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatCompletionsAnswer } from './provider-sse.ts';

export interface ChatRequest {
  stream?: boolean;
  messages: Array<{ role: string; content: unknown; tool_call_id?: string; tool_calls?: Array<{ id: string }> }>;
}

/**
 * Why OpenAI's Chat Completions refuses these messages (its 400's text), if it
 * does: an assistant message's tool calls must each be answered by the tool
 * messages right after it, and a tool message must answer such a call.
 */
export function chatMessagesRefusal(messages: ChatRequest['messages']): string | undefined {
  for (let i = 0; i < messages.length; i++) {
    const m = messages[i];
    if (m.role === 'tool') return "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.";
    if (m.role !== 'assistant' || !m.tool_calls?.length) continue;
    const open = new Set(m.tool_calls.map((c) => c.id));
    for (; messages[i + 1]?.role === 'tool'; i++)
      if (!open.delete(messages[i + 1].tool_call_id!))
        return "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.";
    if (open.size)
      return `An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: ${[...open].join(', ')}`;
  }
  return undefined;
}

/** An answer: its text, or its tool calls (`arguments` as JSON text). */
export interface ChatAnswer {
  text?: string;
  calls?: Array<{ id: string; name: string; arguments: string }>;
}

/** A message's text, whether its content is a string or parts. */
export const chatText = (c: unknown) => (typeof c === 'string' ? c : ((c as Array<{ text?: string }>) ?? []).map((p) => p.text ?? '').join(''));

/**
 * Starts the provider on a free port; `url` is its base URL (`…/v1`) for the SDKs' clients.
 * `strict`: it refuses, as OpenAI does (HTTP 400), messages whose tool calls and results do not pair (chatMessagesRefusal).
 */
export async function startChatProvider(
  answer: (request: ChatRequest) => ChatAnswer,
  opts: { strict?: boolean } = {},
): Promise<{ url: string; close(): void }> {
  let n = 0;
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw) as ChatRequest;
      const refusal = opts.strict ? chatMessagesRefusal(body.messages) : undefined;
      if (refusal) {
        res.writeHead(400, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ error: { message: refusal, type: 'invalid_request_error', param: 'messages', code: null } }));
        return;
      }
      const { text = '', calls = [] } = answer(body);
      const toolCalls = calls.map((c, index) => ({ index, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
      chatCompletionsAnswer(res, body, { id: `chatcmpl_${++n}`, calls: toolCalls, text });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, close: () => server.close() };
}
