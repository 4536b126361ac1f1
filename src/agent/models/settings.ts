// Which model settings a session may carry (session/model's `settings`). A
// provider's request goes out on the operator's key, so a tenant picks only
// sampling fields, each within bounds: never fields that bill or route
// differently (`n`, `service_tier`, `store`, `logprobs`, …) or that replace
// what forkline sends (`model`, `messages`, `tools`, `stream`).
import { z } from 'zod';

/** A provider's settings: every field optional, nothing else accepted. */
export type SettingsSchema = z.ZodObject<Record<string, z.ZodType>>;

/** The longest answer a session may ask for (`max_tokens`), in tokens. */
export const MAX_OUTPUT_TOKENS = 32_768;

/** OpenAI chat-completions sampling fields, which vLLM, Ollama and llama.cpp take too. */
export const SAMPLING_SETTINGS: SettingsSchema = z.object({
  temperature: z.number().min(0).max(2).optional(),
  top_p: z.number().min(0).max(1).optional(),
  max_tokens: z.number().int().min(1).max(MAX_OUTPUT_TOKENS).optional(),
  presence_penalty: z.number().min(-2).max(2).optional(),
  frequency_penalty: z.number().min(-2).max(2).optional(),
  seed: z.number().int().optional(),
  stop: z.union([z.string().max(200), z.array(z.string().max(200)).max(4)]).optional(),
});

/** Why `settings` are not allowed by `schema` (each unknown or out-of-bounds field named), or undefined when they are. */
export function settingsProblem(schema: SettingsSchema, settings: Record<string, unknown> | undefined): string | undefined {
  if (!settings) return undefined;
  const unknown = Object.keys(settings).filter((k) => !Object.hasOwn(schema.shape, k));
  if (unknown.length) return `unknown setting${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')} (allowed: ${Object.keys(schema.shape).join(', ')})`;
  const r = schema.safeParse(settings);
  return r.success ? undefined : r.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ');
}

/**
 * The settings a request carries: only the fields `schema` allows, each within
 * its bounds. Logs written before the allow-list (or by an external runner) may
 * hold others: they are dropped, never sent.
 */
export function allowedSettings(schema: SettingsSchema | undefined, settings: Record<string, unknown> | undefined): Record<string, unknown> | undefined {
  if (!schema || !settings) return undefined;
  const kept = Object.entries(settings).filter(([k, v]) => Object.hasOwn(schema.shape, k) && schema.shape[k].safeParse(v).success);
  return kept.length ? Object.fromEntries(kept) : undefined;
}
