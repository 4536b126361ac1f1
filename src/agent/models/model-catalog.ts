// What the host knows of well-known models: each one's context window (the
// budget its requests are kept under, agent/context-budget.ts) and its price
// (what turns recorded usage into cost, Session.totals.costUsd). Shipped for
// the providers' common models; the operator's file (FORKLINE_MODELS_CONFIG,
// docs/agents.md "Models") adds models or overrides any field. A model is
// matched by its name or by the longest known name it starts with followed by
// "-" (dated snapshots: "gpt-4o-2024-08-06", "claude-sonnet-4-5-20250929").
import fs from 'node:fs';
import { z } from 'zod';

export interface ModelFacts {
  /** The context window, in tokens. */
  contextTokens?: number;
  /** US dollars per million input (prompt) tokens. */
  inputUsdPerMTok?: number;
  /** US dollars per million output (completion) tokens. */
  outputUsdPerMTok?: number;
}

/** The window assumed for a model the table does not know and the session names none for (FORKLINE_CONTEXT_TOKENS overrides it): small, so such a request is compacted early rather than refused. */
export const UNKNOWN_MODEL_CONTEXT_TOKENS = 32_768;

// Published list prices (USD per million tokens, standard tier, prompts up to
// the first pricing threshold) as of late 2025; the operator's file corrects them.
const w = (contextTokens: number, inputUsdPerMTok?: number, outputUsdPerMTok?: number): ModelFacts => ({ contextTokens, inputUsdPerMTok, outputUsdPerMTok });
export const KNOWN_MODELS: Readonly<Record<string, ModelFacts>> = {
  // OpenAI
  'gpt-5': w(400_000, 1.25, 10),
  'gpt-5-mini': w(400_000, 0.25, 2),
  'gpt-5-nano': w(400_000, 0.05, 0.4),
  'gpt-4.1': w(1_047_576, 2, 8),
  'gpt-4.1-mini': w(1_047_576, 0.4, 1.6),
  'gpt-4.1-nano': w(1_047_576, 0.1, 0.4),
  'gpt-4o': w(128_000, 2.5, 10),
  'gpt-4o-mini': w(128_000, 0.15, 0.6),
  'gpt-4-turbo': w(128_000, 10, 30),
  'gpt-4': w(8_192, 30, 60),
  'gpt-3.5-turbo': w(16_385, 0.5, 1.5),
  o1: w(200_000, 15, 60),
  o3: w(200_000, 2, 8),
  'o3-mini': w(200_000, 1.1, 4.4),
  'o4-mini': w(200_000, 1.1, 4.4),
  // Anthropic
  'claude-opus-4-5': w(200_000, 5, 25),
  'claude-opus-4-1': w(200_000, 15, 75),
  'claude-opus-4': w(200_000, 15, 75),
  'claude-sonnet-4-5': w(200_000, 3, 15),
  'claude-sonnet-4': w(200_000, 3, 15),
  'claude-haiku-4-5': w(200_000, 1, 5),
  'claude-3-7-sonnet': w(200_000, 3, 15),
  'claude-3-5-sonnet': w(200_000, 3, 15),
  'claude-3-5-haiku': w(200_000, 0.8, 4),
  'claude-3-opus': w(200_000, 15, 75),
  'claude-3-haiku': w(200_000, 0.25, 1.25),
  // Google
  'gemini-2.5-pro': w(1_048_576, 1.25, 10),
  'gemini-2.5-flash': w(1_048_576, 0.3, 2.5),
  'gemini-2.5-flash-lite': w(1_048_576, 0.1, 0.4),
  'gemini-2.0-flash': w(1_048_576, 0.1, 0.4),
  'gemini-2.0-flash-lite': w(1_048_576, 0.075, 0.3),
  'gemini-1.5-pro': w(2_097_152, 1.25, 5),
  'gemini-1.5-flash': w(1_048_576, 0.075, 0.3),
  // Open models as OpenAI-compatible servers commonly name them (no price: the operator's hardware).
  'llama3.1': w(131_072),
  'llama3.2': w(131_072),
  llama3: w(8_192),
  mistral: w(32_768),
  'qwen2.5': w(32_768),
};

const factsSchema = z.strictObject({
  contextTokens: z.number().int().min(256).max(100_000_000).optional(),
  inputUsdPerMTok: z.number().nonnegative().max(100_000).optional(),
  outputUsdPerMTok: z.number().nonnegative().max(100_000).optional(),
});
const fileSchema = z.strictObject({ models: z.record(z.string().min(1).max(200), factsSchema) });

/** The operator's models file (FORKLINE_MODELS_CONFIG): `{"models": {name: {contextTokens, inputUsdPerMTok, outputUsdPerMTok}}}`. */
export function readModelsFile(path: string): Record<string, ModelFacts> {
  const parsed = fileSchema.safeParse(JSON.parse(fs.readFileSync(path, 'utf8')));
  if (!parsed.success) throw new Error(`FORKLINE_MODELS_CONFIG ${path}: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`);
  return parsed.data.models;
}

export class ModelCatalog {
  private readonly models: Map<string, ModelFacts>;

  /** `overrides`: the operator's models, each field over the shipped one of the same name. */
  constructor(overrides: Readonly<Record<string, ModelFacts>> = {}) {
    this.models = new Map(Object.entries(KNOWN_MODELS));
    for (const [name, facts] of Object.entries(overrides)) this.models.set(name.toLowerCase(), { ...this.models.get(name.toLowerCase()), ...facts });
  }

  /** What is known of a model name ("models/…" and "vendor/…" prefixes ignored); undefined: nothing. */
  facts(model: string): ModelFacts | undefined {
    const name = model.toLowerCase().replace(/^.*\//, '');
    const exact = this.models.get(name);
    if (exact) return exact;
    let best: string | undefined;
    for (const known of this.models.keys()) if (name.startsWith(`${known}-`) && (!best || known.length > best.length)) best = known;
    return best === undefined ? undefined : this.models.get(best);
  }

  /** The cost in US dollars of a call's reported usage, when the model's prices are known. */
  costOf(model: string, usage: { inputTokens?: number; outputTokens?: number }): number | undefined {
    const f = this.facts(model);
    if (f?.inputUsdPerMTok === undefined || f.outputUsdPerMTok === undefined) return undefined;
    const usd = ((usage.inputTokens ?? 0) * f.inputUsdPerMTok + (usage.outputTokens ?? 0) * f.outputUsdPerMTok) / 1_000_000;
    return Math.round(usd * 1e9) / 1e9; // nano-dollars: sums stay exact enough, JSON stays short
  }
}

/** The shipped table alone (what a host without FORKLINE_MODELS_CONFIG knows). */
export const SHIPPED_MODELS = new ModelCatalog();
