// Any OpenAI-compatible chat-completions server (OpenAI, vLLM, Ollama,
// llama.cpp), streamed over SSE.
import type { ModelAnswer, ModelRequest } from '../../core/chat.ts';
import type { ToolCall } from '../../core/events.ts';
import { ModelError, type ChatModel, type CompleteOptions } from './model.ts';
import { SAMPLING_SETTINGS } from './settings.ts';

export interface OpenAIOptions {
  baseUrl: string;
  apiKey?: string;
  /** Used when the session's model configuration names none. */
  defaultModel?: string;
}

export class OpenAIChatModel implements ChatModel {
  readonly settings = SAMPLING_SETTINGS;

  constructor(private readonly opts: OpenAIOptions) {}

  async complete(request: ModelRequest, { signal, onDelta }: CompleteOptions): Promise<ModelAnswer> {
    const model = request.model || this.opts.defaultModel;
    if (!model) throw new ModelError('openai provider: no model configured (set MODEL or the session model)');
    let res: Response;
    try {
      res = await fetch(`${this.opts.baseUrl.replace(/\/$/, '')}/chat/completions`, {
        method: 'POST',
        signal,
        headers: {
          'content-type': 'application/json',
          accept: 'text/event-stream',
          ...(this.opts.apiKey ? { authorization: `Bearer ${this.opts.apiKey}` } : {}),
        },
        body: JSON.stringify({
          ...(request.settings ?? {}), // already limited to SAMPLING_SETTINGS (session-runner.ts)
          model,
          stream: true,
          messages: request.messages,
          ...(request.tools.length
            ? { tools: request.tools.map((t) => ({ type: 'function', function: { name: t.name, description: t.description, parameters: t.parameters } })) }
            : {}),
        }),
      });
    } catch (err) {
      if (signal.aborted) throw err;
      throw new ModelError(`openai provider: request failed: ${(err as Error).message}`);
    }
    if (!res.ok || !res.body) {
      const body = await res.text().catch(() => '');
      throw new ModelError(`openai provider: HTTP ${res.status}: ${body.slice(0, 500)}`);
    }

    let text = '';
    let usage: ModelAnswer['usage'];
    const calls: Array<{ id: string; name: string; arguments: string }> = [];
    const decoder = new TextDecoder();
    let buffer = '';
    for await (const chunk of res.body as unknown as AsyncIterable<Uint8Array>) {
      buffer += decoder.decode(chunk, { stream: true });
      let nl: number;
      while ((nl = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, nl).trim();
        buffer = buffer.slice(nl + 1);
        if (!line.startsWith('data:')) continue;
        const payload = line.slice(5).trim();
        if (payload === '[DONE]') continue;
        let json: any;
        try {
          json = JSON.parse(payload);
        } catch {
          throw new ModelError(`openai provider: malformed stream chunk: ${payload.slice(0, 200)}`);
        }
        if (json.error) throw new ModelError(`openai provider: ${json.error.message ?? JSON.stringify(json.error)}`);
        // Sent by servers that report usage on streams (OpenAI with stream_options.include_usage, vLLM, …).
        if (json.usage && typeof json.usage === 'object') {
          usage = { inputTokens: json.usage.prompt_tokens, outputTokens: json.usage.completion_tokens };
        }
        const delta = json.choices?.[0]?.delta ?? {};
        if (typeof delta.content === 'string' && delta.content) {
          text += delta.content;
          onDelta(delta.content);
        }
        for (const tc of delta.tool_calls ?? []) {
          const i = tc.index ?? calls.length;
          calls[i] ??= { id: '', name: '', arguments: '' };
          if (tc.id) calls[i].id = tc.id;
          if (tc.function?.name) calls[i].name += tc.function.name;
          if (tc.function?.arguments) calls[i].arguments += tc.function.arguments;
        }
      }
    }
    const toolCalls: ToolCall[] = calls
      .filter(Boolean)
      .map((c, i) => ({ id: c.id || `call_${Date.now()}_${i}`, name: c.name, arguments: c.arguments || '{}' }));
    return usage ? { text, toolCalls, usage } : { text, toolCalls };
  }
}
