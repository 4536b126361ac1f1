// Model providers by name (session/model's `provider`).
import { ModelError, type ChatModel } from './model.ts';
import { OpenAIChatModel } from './openai.ts';
import { ScriptedModel } from './scripted.ts';

export interface ModelSettings {
  openaiBaseUrl?: string;
  openaiApiKey?: string;
  defaultModel?: string;
}

export class ModelRegistry {
  readonly scripted = new ScriptedModel();
  private readonly providers = new Map<string, ChatModel>();

  constructor(settings: ModelSettings = {}) {
    this.providers.set('scripted', this.scripted);
    this.providers.set(
      'openai',
      new OpenAIChatModel({ baseUrl: settings.openaiBaseUrl ?? 'https://api.openai.com/v1', apiKey: settings.openaiApiKey, defaultModel: settings.defaultModel }),
    );
  }

  get names(): string[] {
    return [...this.providers.keys()];
  }

  /** Replaces or adds a provider (tests plug in recording models this way). */
  register(name: string, model: ChatModel) {
    this.providers.set(name, model);
  }

  resolve(provider: string): ChatModel {
    const m = this.providers.get(provider);
    if (!m) throw new ModelError(`unknown model provider "${provider}"`);
    return m;
  }
}
