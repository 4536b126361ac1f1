import { z } from 'zod';
import { builder } from '../builder.ts';
import { idSchema } from '../../core/input-rules.ts';

export const ModelConfigInput = builder.inputType('ModelConfigInput', {
  fields: (t) => ({
    provider: t.string({
      required: true,
      description:
        '`scripted` (keyless, default), `openai`, `openai-responses`, `anthropic`, `google`, or `openai-compatible` (when the host has its base URL): the `models` query lists them.',
    }),
    model: t.string({ required: true }),
    contextTokens: t.int({
      description:
        "The model's context window in tokens: the budget its requests are kept under (automatic compaction). Unset: the known window of a well-known model, else FORKLINE_CONTEXT_TOKENS.",
    }),
    settings: t.field({
      type: 'JSON',
      description:
        'Sampling settings for each request: temperature, topP, topK, maxOutputTokens, presencePenalty, frequencyPenalty, seed, stopSequences (or top_p, top_k, max_tokens, presence_penalty, frequency_penalty, stop), within their bounds; anything else is BAD_USER_INPUT.',
    }),
  }),
});

const MAX_SETTINGS_BYTES = 16 * 1024;

/** Serialized size, or Infinity when the value cannot be serialized (nested too deep to stringify). */
function jsonSize(value: unknown): number {
  try {
    return JSON.stringify(value).length;
  } catch {
    return Infinity;
  }
}

export const modelSchema = z.object({
  provider: z.string().min(1).max(100),
  model: z.string().min(1).max(200),
  contextTokens: z
    .number()
    .int()
    .min(256)
    .max(100_000_000)
    .nullish()
    .transform((v) => v ?? undefined),
  settings: z
    .record(z.string(), z.unknown())
    .refine((v) => jsonSize(v) <= MAX_SETTINGS_BYTES, `at most ${MAX_SETTINGS_BYTES} bytes of JSON`)
    .nullish()
    .transform((v) => v ?? undefined),
});

/** A session's tool set (session/tools): tool names, `<server>__*` or `*`; which exist is the controller's check. */
export const toolSetSchema = z.array(idSchema).max(500);
