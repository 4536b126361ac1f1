// What each provider's API refuses in a request body, as its 400 says, for the
// fake providers of the wire tests: OpenAI Chat Completions (`openai`), OpenAI
// Responses (`openai-responses`), Anthropic Messages (`anthropic`) and Gemini
// generateContent (`google`). The rules are the providers' documented ones and
// the messages their servers answer with:
// - ids: Chat Completions `messages[].tool_calls[].id` at most 40 characters
//   ("string too long. Expected a string with maximum length 40"); Responses
//   `input[].call_id` at most 64; Anthropic `tool_use.id` `^[a-zA-Z0-9_-]+$`,
//   unique in the request ("`tool_use` ids must be unique").
// - names: OpenAI function names `^[a-zA-Z0-9_-]{1,64}$` (in `tools` and in a
//   history's `tool_calls`); Anthropic `^[a-zA-Z0-9_-]{1,128}$`; Gemini "Must
//   start with a letter or an underscore. Must be a-z, A-Z, 0-9, or contain
//   underscores, dots, colons or dashes, with a maximum length of 64".
// - pairing: a result answers a call of the message before it (Chat
//   Completions, Anthropic), a call of the input (Responses: by call_id), or
//   the call turn before it, part for part (Gemini).
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chatMessagesRefusal } from './chat-completions.ts';
import {
  anthropicMessage,
  anthropicText,
  anthropicToolCall,
  chatText,
  chatToolCall,
  geminiText,
  geminiToolCall,
  responsesText,
  responsesToolCall,
} from './provider-sse.ts';

type Body = any;

const OPENAI_NAME = /^[a-zA-Z0-9_-]{1,64}$/;
const ANTHROPIC_NAME = /^[a-zA-Z0-9_-]{1,128}$/;
const ANTHROPIC_ID = /^[a-zA-Z0-9_-]+$/;
const GEMINI_NAME = /^[a-zA-Z_][a-zA-Z0-9_.:-]{0,63}$/;

const badName = (where: string, name: unknown) =>
  `Invalid '${where}': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'. (${JSON.stringify(name)})`;

function chatCompletions(b: Body): string | undefined {
  for (const [i, t] of (b.tools ?? []).entries()) if (!OPENAI_NAME.test(t.function?.name)) return badName(`tools[${i}].function.name`, t.function?.name);
  for (const [i, m] of b.messages.entries())
    for (const [j, c] of (m.tool_calls ?? []).entries()) {
      if (typeof c.id !== 'string' || c.id.length > 40)
        return `Invalid 'messages[${i}].tool_calls[${j}].id': string too long. Expected a string with maximum length 40, but got a string with length ${c.id?.length} instead.`;
      if (!OPENAI_NAME.test(c.function?.name)) return badName(`messages[${i}].tool_calls[${j}].function.name`, c.function?.name);
    }
  return chatMessagesRefusal(b.messages);
}

function responses(b: Body): string | undefined {
  for (const [i, t] of (b.tools ?? []).entries()) if (!OPENAI_NAME.test(t.name)) return badName(`tools[${i}].name`, t.name);
  const calls = new Set<string>();
  for (const [i, item] of b.input.entries()) {
    if (item.type !== 'function_call' && item.type !== 'function_call_output') continue;
    if (typeof item.call_id !== 'string' || item.call_id.length > 64)
      return `Invalid 'input[${i}].call_id': string too long. Expected a string with maximum length 64, but got a string with length ${item.call_id?.length} instead.`;
    if (item.type === 'function_call') {
      if (!OPENAI_NAME.test(item.name)) return badName(`input[${i}].name`, item.name);
      if (calls.has(item.call_id)) return `Duplicate function call with call_id ${item.call_id}.`;
      calls.add(item.call_id);
    } else if (!calls.has(item.call_id)) return `No tool call found for function call output with call_id ${item.call_id}.`;
  }
  return undefined;
}

function anthropic(b: Body): string | undefined {
  for (const [i, t] of (b.tools ?? []).entries())
    if (!ANTHROPIC_NAME.test(t.name)) return `tools.${i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`;
  const seen = new Set<string>();
  let previousUses = new Set<string>();
  for (const [i, m] of b.messages.entries()) {
    const parts: any[] = Array.isArray(m.content) ? m.content : [];
    const uses = new Set<string>();
    for (const [j, p] of parts.entries()) {
      if (p.type === 'tool_use') {
        if (!ANTHROPIC_ID.test(p.id)) return `messages.${i}.content.${j}.tool_use.id: String should match pattern '^[a-zA-Z0-9_-]+$'`;
        if (!ANTHROPIC_NAME.test(p.name)) return `messages.${i}.content.${j}.tool_use.name: String should match pattern '^[a-zA-Z0-9_-]{1,128}$'`;
        if (seen.has(p.id)) return `messages.${i}.content.${j}: \`tool_use\` ids must be unique`;
        seen.add(p.id);
        uses.add(p.id);
      }
      if (p.type === 'tool_result' && !previousUses.has(p.tool_use_id))
        return `messages.${i}.content.${j}: unexpected \`tool_use_id\` found in \`tool_result\` blocks: ${p.tool_use_id}. Each \`tool_result\` block must have a corresponding \`tool_use\` block in the previous message.`;
    }
    previousUses = uses;
  }
  return undefined;
}

const geminiBadName = (where: string) =>
  `* GenerateContentRequest.${where}: Invalid function name. Must start with a letter or an underscore. Must be a-z, A-Z, 0-9, or contain underscores, dots, colons or dashes, with a maximum length of 64.`;

function gemini(b: Body): string | undefined {
  for (const [i, t] of (b.tools ?? []).entries())
    for (const [j, f] of (t.functionDeclarations ?? []).entries())
      if (!GEMINI_NAME.test(f.name)) return geminiBadName(`tools[${i}].function_declarations[${j}].name`);
  for (const [i, c] of b.contents.entries()) {
    for (const [j, p] of c.parts.entries()) {
      const name = p.functionCall?.name ?? p.functionResponse?.name;
      if (name !== undefined && !GEMINI_NAME.test(name))
        return geminiBadName(`contents[${i}].parts[${j}].${p.functionCall ? 'function_call' : 'function_response'}.name`);
    }
    const answers = c.parts.filter((p: any) => p.functionResponse).length;
    const calls = i > 0 ? b.contents[i - 1].parts.filter((p: any) => p.functionCall).length : 0;
    if (answers && answers !== calls)
      return 'Please ensure that the number of function response parts is equal to the number of function call parts of the function call turn.';
  }
  return undefined;
}

/** Why the provider's API refuses this request body (its 400's message), if it does. */
export const wireRefusal: Record<'openai' | 'openai-responses' | 'anthropic' | 'google', (b: Body) => string | undefined> = {
  openai: chatCompletions,
  'openai-responses': responses,
  anthropic,
  google: gemini,
};

/** A provider's 400 answer carrying `message`, in its own error shape. */
export const refusalBody = (provider: string, message: string) =>
  provider === 'anthropic'
    ? { type: 'error', error: { type: 'invalid_request_error', message } }
    : provider === 'google'
      ? { error: { code: 400, message, status: 'INVALID_ARGUMENT' } }
      : { error: { message, type: 'invalid_request_error', param: null, code: 'invalid_value' } };

export type Provider = keyof typeof wireRefusal;

/** The tools a request offers: [name, description]. */
export const toolsOffered: Record<Provider, (b: Body) => Array<[string, string]>> = {
  openai: (b) => (b.tools ?? []).map((t: any) => [t.function.name, t.function.description]),
  'openai-responses': (b) => (b.tools ?? []).map((t: any) => [t.name, t.description]),
  anthropic: (b) => (b.tools ?? []).map((t: any) => [t.name, t.description]),
  google: (b) => (b.tools ?? []).flatMap((t: any) => t.functionDeclarations ?? []).map((f: any) => [f.name, f.description]),
};

/** A provider's streamed answer: one call, or text. */
export const answers: Record<Provider, { call(c: { id: string; name: string; arguments: string }): string[]; text(t: string): string[] }> = {
  openai: { call: chatToolCall, text: (t) => chatText([t], { input: 5, output: 1 }) },
  'openai-responses': { call: responsesToolCall, text: (t) => responsesText([t], { input: 5, output: 1 }) },
  anthropic: { call: anthropicToolCall, text: (t) => anthropicText([t], { input: 5, output: 1 }) },
  google: { call: geminiToolCall, text: (t) => geminiText([t], { input: 5, output: 1 }) },
};

/**
 * A fake of the four APIs on one port (`<base>/openai/v1`, `<base>/anthropic/v1`, `<base>/google/v1beta`):
 * each request is kept with why the API would refuse it, and a refused one is answered with the API's 400;
 * another with `answer`'s SSE events (`n`: the provider's requests so far, this one too), or, to an Anthropic
 * request that does not ask to stream, with the one JSON message those events make (anthropicMessage).
 */
export async function refusingProviders(answer: (provider: Provider, body: Body, n: number) => string[]) {
  const received: Array<{ provider: Provider; body: Body; refusal?: string }> = [];
  const providerOf = (url: string): Provider =>
    url.startsWith('/anthropic') ? 'anthropic' : url.startsWith('/google') ? 'google' : url.includes('/responses') ? 'openai-responses' : 'openai';
  const server = http.createServer(async (req, res) => {
    let raw = '';
    for await (const c of req) raw += c;
    const provider = providerOf(req.url!);
    const body = JSON.parse(raw);
    const refusal = wireRefusal[provider](body);
    received.push({ provider, body, refusal });
    if (refusal) return void res.writeHead(400, { 'content-type': 'application/json' }).end(JSON.stringify(refusalBody(provider, refusal)));
    const events = answer(provider, body, received.filter((r) => r.provider === provider).length);
    // Anthropic answers a request that does not ask to stream with one JSON message (generateText's).
    if (provider === 'anthropic' && body.stream !== true)
      return void res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(anthropicMessage(events)));
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    res.end(events.join(''));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    base: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    received,
    close: () => new Promise<void>((r) => server.close(() => r())),
  };
}
