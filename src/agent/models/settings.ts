// Which model settings a session may carry (session/model's `settings`) and
// how they reach a model: an allow-list of sampling fields, each within
// bounds, mapped onto the AI SDK's call options. A provider's request goes out
// on the operator's key, so a tenant never picks fields that bill or route
// differently, nor ones that replace what forkline sends (model, messages, tools).
import { z } from 'zod';
import type { LanguageModelV3CallOptions } from '@ai-sdk/provider';

/** The longest answer a session may ask for, in tokens. */
export const MAX_OUTPUT_TOKENS = 131_072;

const stopSequences = z.array(z.string().min(1).max(200)).max(4);

/** The AI SDK's names (LanguageModelV3CallOptions), every one optional. */
const CALL_SETTINGS = {
  temperature: z.number().min(0).max(2),
  topP: z.number().min(0).max(1),
  topK: z.number().int().min(1).max(1000),
  maxOutputTokens: z.number().int().min(1).max(MAX_OUTPUT_TOKENS),
  presencePenalty: z.number().min(-2).max(2),
  frequencyPenalty: z.number().min(-2).max(2),
  seed: z.number().int(),
  stopSequences,
} as const;

type CallSettingName = keyof typeof CALL_SETTINGS;
export type CallSettings = Partial<Pick<LanguageModelV3CallOptions, CallSettingName>>;

/** Chat-completions names sessions used before the AI SDK (and that its users know): the same settings. */
const ALIASES: Record<string, { name: CallSettingName; schema: z.ZodType }> = {
  top_p: { name: 'topP', schema: CALL_SETTINGS.topP },
  top_k: { name: 'topK', schema: CALL_SETTINGS.topK },
  max_tokens: { name: 'maxOutputTokens', schema: CALL_SETTINGS.maxOutputTokens },
  presence_penalty: { name: 'presencePenalty', schema: CALL_SETTINGS.presencePenalty },
  frequency_penalty: { name: 'frequencyPenalty', schema: CALL_SETTINGS.frequencyPenalty },
  stop: {
    name: 'stopSequences',
    schema: z.union([
      z
        .string()
        .min(1)
        .max(200)
        .transform((s) => [s]),
      stopSequences,
    ]),
  },
};

/** The setting a session's field names, and the schema of its value; undefined for a field not allowed. */
function settingOf(field: string): { name: CallSettingName; schema: z.ZodType } | undefined {
  if (Object.hasOwn(CALL_SETTINGS, field)) return { name: field as CallSettingName, schema: CALL_SETTINGS[field as CallSettingName] };
  return Object.hasOwn(ALIASES, field) ? ALIASES[field] : undefined;
}

/** Why `settings` are not allowed (each unknown or out-of-bounds field named), or undefined when they are. */
export function settingsProblem(settings: Record<string, unknown> | undefined): string | undefined {
  if (!settings) return undefined;
  const fields = Object.keys(settings);
  const unknown = fields.filter((k) => !settingOf(k));
  if (unknown.length) {
    return `unknown setting${unknown.length > 1 ? 's' : ''} ${unknown.map((k) => `"${k}"`).join(', ')} (allowed: ${Object.keys(CALL_SETTINGS).join(', ')})`;
  }
  const names = fields.map((k) => settingOf(k)!.name);
  const twice = names.filter((n, i) => names.indexOf(n) !== i);
  if (twice.length) return `setting "${twice[0]}" given twice (under two names)`;
  const bad = fields.flatMap((k) => {
    const r = settingOf(k)!.schema.safeParse(settings[k]);
    return r.success ? [] : [`${k}: ${r.error.issues.map((i) => i.message).join(', ')}`];
  });
  return bad.length ? bad.join('; ') : undefined;
}

/**
 * The call options a session's settings give: only allowed fields within their
 * bounds, under the AI SDK's names. Logs written before the allow-list (or by an
 * external runner) may hold others: they are dropped, never sent.
 */
export function callSettings(settings: Record<string, unknown> | undefined): CallSettings {
  const out: Record<string, unknown> = {};
  for (const [field, value] of Object.entries(settings ?? {})) {
    const setting = settingOf(field);
    const r = setting?.schema.safeParse(value);
    if (setting && r?.success) out[setting.name] = r.data;
  }
  return out as CallSettings;
}
