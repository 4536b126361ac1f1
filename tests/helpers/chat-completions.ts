// A fake model provider speaking the Chat Completions wire format, for tests
// of the runner adapters with the frameworks' own OpenAI model packages: the
// test decides each answer from the request; the server answers as OpenAI's
// does (JSON, or server-sent chunks when `stream` was asked).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatCompletionsAnswer } from './provider-sse.ts';

export interface ChatRequest {
  stream?: boolean;
  messages: Array<{ role: string; content: unknown; tool_call_id?: string }>;
}

/** An answer: its text, or its tool calls (`arguments` as JSON text). */
export interface ChatAnswer {
  text?: string;
  calls?: Array<{ id: string; name: string; arguments: string }>;
}

/** A message's text, whether its content is a string or parts. */
export const chatText = (c: unknown) => (typeof c === 'string' ? c : ((c as Array<{ text?: string }>) ?? []).map((p) => p.text ?? '').join(''));

/** Starts the provider on a free port; `url` is its base URL (`…/v1`) for the SDKs' clients. */
export async function startChatProvider(answer: (request: ChatRequest) => ChatAnswer): Promise<{ url: string; close(): void }> {
  let n = 0;
  const server = http.createServer((req, res) => {
    let raw = '';
    req.on('data', (c) => (raw += c));
    req.on('end', () => {
      const body = JSON.parse(raw) as ChatRequest;
      const { text = '', calls = [] } = answer(body);
      const toolCalls = calls.map((c, index) => ({ index, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
      chatCompletionsAnswer(res, body, { id: `chatcmpl_${++n}`, calls: toolCalls, text });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`, close: () => server.close() };
}
