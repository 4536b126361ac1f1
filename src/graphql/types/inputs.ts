import { z } from 'zod';
import { builder } from '../builder.ts';

export const ModelConfigInput = builder.inputType('ModelConfigInput', {
  fields: (t) => ({
    provider: t.string({ required: true, description: '`scripted` (keyless, default) or `openai`.' }),
    model: t.string({ required: true }),
    settings: t.field({ type: 'JSON', description: 'Extra request fields for the provider (e.g. temperature).' }),
  }),
});

export const modelSchema = z.object({
  provider: z.string().min(1).max(100),
  model: z.string().min(1).max(200),
  settings: z.record(z.string(), z.unknown()).nullish().transform((v) => v ?? undefined),
});
