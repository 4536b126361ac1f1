// The model providers a host can offer, by the name a session's model
// configuration gives (session/model's `provider`), each an AI SDK provider:
//   scripted            the keyless deterministic model (scripted.ts)
//   openai              OpenAI chat completions
//   openai-responses    OpenAI Responses API
//   anthropic           Anthropic messages
//   google              Google Generative AI (Gemini) generateContent
//   openai-compatible   any OpenAI-compatible chat-completions server (vLLM,
//                       Ollama, llama.cpp): offered when its base URL is set
// Keys and base URLs come from the configuration (config.ts: OPENAI_API_KEY,
// ANTHROPIC_API_KEY, GOOGLE_GENERATIVE_AI_API_KEY, the *_BASE_URL variables).
import type { LanguageModelV3 } from '@ai-sdk/provider';
import { createAnthropic } from '@ai-sdk/anthropic';
import { createGoogleGenerativeAI } from '@ai-sdk/google';
import { createOpenAI } from '@ai-sdk/openai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import type { PromptOptions } from './prompt.ts';
import { geminiEventScreen } from './gemini-events.ts';
import { boundedFetch, DEFAULT_PROVIDER_LIMITS, type ProviderLimits } from './provider-fetch.ts';
import { ScriptedLanguageModel } from './scripted.ts';

export interface Endpoint {
  /** Unset: the provider's public API. */
  baseUrl?: string;
  /** Unset: the SDK reads the provider's usual environment variable when a request is made. */
  apiKey?: string;
}

export interface ProviderConfig {
  openai?: Endpoint;
  anthropic?: Endpoint;
  google?: Endpoint;
  /** An OpenAI-compatible server; the provider is offered only with a base URL. */
  openaiCompatible?: Endpoint & { baseUrl: string };
  /** What one model call's response may cost the process (provider-fetch.ts); unset: DEFAULT_PROVIDER_LIMITS. */
  limits?: ProviderLimits;
}

export interface ProviderFamily {
  languageModel(modelId: string): LanguageModelV3;
  prompt?: PromptOptions;
  /** The key its requests carry: never in what its errors say (language-model.ts). */
  keys?: readonly string[];
}

/** The providers this configuration offers, by name. */
export function providersOf(config: ProviderConfig): Map<string, ProviderFamily> {
  const limits = config.limits ?? DEFAULT_PROVIDER_LIMITS;
  // Every provider's responses are read through the bounded fetch.
  const fetch = boundedFetch(limits);
  const endpoint = (e: Endpoint | undefined, f = fetch) => ({ baseURL: e?.baseUrl, apiKey: e?.apiKey, fetch: f });
  const openai = createOpenAI(endpoint(config.openai));
  const anthropic = createAnthropic(endpoint(config.anthropic));
  // Gemini's events are screened before the SDK reads them (gemini-events.ts: argument paths it would expand).
  const google = createGoogleGenerativeAI(endpoint(config.google, boundedFetch(limits, { screen: geminiEventScreen })));
  // Anthropic and Google take system text only ahead of the conversation (a compaction's summary may stand later).
  const systemOnlyAtStart = { systemOnlyAtStart: true };
  const keys = (e: Endpoint | undefined) => (e?.apiKey ? [e.apiKey] : []);
  const families = new Map<string, ProviderFamily>([
    ['scripted', { languageModel: (id) => new ScriptedLanguageModel(id) }],
    ['openai', { languageModel: (id) => openai.chat(id), keys: keys(config.openai) }],
    ['openai-responses', { languageModel: (id) => openai.responses(id), keys: keys(config.openai) }],
    ['anthropic', { languageModel: (id) => anthropic.messages(id), prompt: systemOnlyAtStart, keys: keys(config.anthropic) }],
    ['google', { languageModel: (id) => google.languageModel(id), prompt: { ...systemOnlyAtStart, resultsTogether: true }, keys: keys(config.google) }],
  ]);
  if (config.openaiCompatible?.baseUrl) {
    const compatible = createOpenAICompatible({
      name: 'openai-compatible',
      ...endpoint(config.openaiCompatible),
      baseURL: config.openaiCompatible.baseUrl,
      includeUsage: true,
      // vLLM, Ollama and llama.cpp take OpenAI's json_schema response format (structured output).
      supportsStructuredOutputs: true,
    });
    families.set('openai-compatible', { languageModel: (id) => compatible.chatModel(id), keys: keys(config.openaiCompatible) });
  }
  return families;
}
