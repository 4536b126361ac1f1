// Model providers by name (session/model's `provider`), each behind the one
// adapter (language-model.ts).
import type { ModelRequest } from '../../core/chat.ts';
import { LanguageChatModel } from './language-model.ts';
import { ModelError, type ChatModel, type ModelRetryPolicy } from './model.ts';
import { providersOf, type ProviderConfig, type ProviderFamily } from './providers.ts';
import { settingsProblem } from './settings.ts';

export interface RegistryOptions extends ProviderConfig {
  /** The model sessions use until they pick one (offered by the models query). */
  defaultModel?: { provider: string; model: string };
  /** How failed model calls are tried again (FORKLINE_MODEL_MAX_RETRIES); unset: DEFAULT_MODEL_RETRIES. */
  retries?: ModelRetryPolicy;
}

/** A provider and the model names the host knows for it (empty: any name the provider's server accepts). */
export interface ModelOffer {
  provider: string;
  models: string[];
}

const RECENT_REQUESTS = 20;

/** The requests a model was asked, the most recent ones kept (tests assert on the scripted model's; bounded for a long-running server). */
export class RequestLog {
  requestCount = 0;
  readonly recentRequests: ModelRequest[] = [];

  get lastRequest(): ModelRequest | undefined {
    return this.recentRequests.at(-1);
  }

  record(request: ModelRequest) {
    this.requestCount++;
    // Kept as given: the agent hands each request a fresh array of messages it never mutates.
    this.recentRequests.push(request);
    if (this.recentRequests.length > RECENT_REQUESTS) this.recentRequests.shift();
  }
}

export class ModelRegistry {
  /** What the scripted model was asked. */
  readonly scripted = new RequestLog();
  private readonly providers = new Map<string, ChatModel>();

  constructor(private readonly opts: RegistryOptions = {}) {
    for (const [name, family] of providersOf(opts)) this.register(name, family);
  }

  get names(): string[] {
    return [...this.providers.keys()];
  }

  /** What the dashboard's picker offers: the scripted model and the configured default; other names stay free text. */
  offers(): ModelOffer[] {
    const d = this.opts.defaultModel;
    return this.names.map((provider) => ({
      provider,
      models: provider === 'scripted' ? ['scripted'] : d?.provider === provider ? [d.model] : [],
    }));
  }

  /** Replaces or adds a provider (tests plug in the SDK's mock models this way). */
  register(name: string, family: ProviderFamily) {
    this.providers.set(
      name,
      new LanguageChatModel({
        provider: name,
        ...family,
        retries: this.opts.retries,
        ...(this.opts.limits?.maxToolCalls !== undefined ? { maxToolCalls: this.opts.limits.maxToolCalls } : {}),
        onRequest: name === 'scripted' ? (r) => this.scripted.record(r) : undefined,
      }),
    );
  }

  /** Why a session may not use this model configuration (unknown provider, settings not allowed), or undefined. */
  configProblem(config: { provider: string; settings?: Record<string, unknown> | null }): string | undefined {
    if (!this.providers.has(config.provider)) return `unknown model provider "${config.provider}" (known: ${this.names.join(', ')})`;
    const problem = settingsProblem(config.settings ?? undefined);
    return problem && `model settings: ${problem}`;
  }

  resolve(provider: string): ChatModel {
    const m = this.providers.get(provider);
    if (!m) throw new ModelError(`unknown model provider "${provider}"`);
    return m;
  }
}
