// Model providers by name (session/model's `provider`).
import { ModelError, type ChatModel } from './model.ts';
import { OpenAIChatModel } from './openai.ts';
import { ScriptedModel } from './scripted.ts';
import { settingsProblem } from './settings.ts';

export interface ModelSettings {
  openaiBaseUrl?: string;
  openaiApiKey?: string;
  defaultModel?: string;
}

/** A provider and the model names the host knows for it (empty: any name the provider's server accepts). */
export interface ModelOffer {
  provider: string;
  models: string[];
}

export class ModelRegistry {
  readonly scripted = new ScriptedModel();
  private readonly providers = new Map<string, ChatModel>();

  constructor(private readonly settings: ModelSettings = {}) {
    this.providers.set('scripted', this.scripted);
    this.providers.set(
      'openai',
      new OpenAIChatModel({ baseUrl: settings.openaiBaseUrl ?? 'https://api.openai.com/v1', apiKey: settings.openaiApiKey, defaultModel: settings.defaultModel }),
    );
  }

  get names(): string[] {
    return [...this.providers.keys()];
  }

  /**
   * What the dashboard's picker offers. The host only knows the scripted model
   * and the configured OpenAI-compatible MODEL; other names stay free text.
   */
  offers(): ModelOffer[] {
    return this.names.map((provider) => ({
      provider,
      models: provider === 'scripted' ? ['scripted'] : provider === 'openai' && this.settings.defaultModel ? [this.settings.defaultModel] : [],
    }));
  }

  /** Replaces or adds a provider (tests plug in recording models this way). */
  register(name: string, model: ChatModel) {
    this.providers.set(name, model);
  }

  /** Why a session may not use this model configuration (unknown provider, settings it does not allow), or undefined. */
  configProblem(config: { provider: string; settings?: Record<string, unknown> }): string | undefined {
    const m = this.providers.get(config.provider);
    if (!m) return `unknown model provider "${config.provider}" (known: ${this.names.join(', ')})`;
    const problem = m.settings ? settingsProblem(m.settings, config.settings) : config.settings && Object.keys(config.settings).length ? 'takes no settings' : undefined;
    return problem && `model settings for provider "${config.provider}": ${problem}`;
  }

  resolve(provider: string): ChatModel {
    const m = this.providers.get(provider);
    if (!m) throw new ModelError(`unknown model provider "${provider}"`);
    return m;
  }
}
