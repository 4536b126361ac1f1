import { z } from 'zod';
import { builder } from '../builder.ts';
import { idSchema, modelNameSchema, providerNameSchema } from '../../core/input-rules.ts';
import { badInput } from '../../core/errors.ts';
import { responseFormatSchema, type ResponseFormat } from '../../core/events.ts';
import { unstorableReason } from '../../core/storable.ts';
import { MAX_MODEL_NAME_CHARS, MAX_RESPONSE_SCHEMA_CHARS } from '../../core/text-limits.ts';

export const ModelConfigInput = builder.inputType('ModelConfigInput', {
  fields: (t) => ({
    provider: t.string({
      required: true,
      description:
        '`scripted` (keyless, default), `openai`, `openai-responses`, `anthropic`, `google`, or `openai-compatible` (when the host has its base URL): the `models` query lists them.',
    }),
    model: t.string({ required: true, description: `The model's name (at most ${MAX_MODEL_NAME_CHARS} characters).` }),
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
  provider: providerNameSchema,
  model: modelNameSchema,
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

/** The descriptions of a message's structured-output fields (sendMessage, editMessage, a fork's or variant's message). */
export const RESPONSE_SCHEMA_DOC =
  "A JSON Schema (draft 2020-12 or draft-07; its root an object schema) the message's final answer must match: sent to the provider as its structured-output " +
  'format, the answer validated against it (Turn.structuredOutput), a mismatch fails the turn. Kept with the input (inbox/add), so forks and replays ask the same. ' +
  `At most ${MAX_RESPONSE_SCHEMA_CHARS} characters of JSON.`;
export const RESPONSE_SCHEMA_NAME_DOC = 'The name the schema is sent under where the provider takes one (OpenAI): 1-64 letters, digits, "_" or "-".';

/** The structured-output fields of a mutation's input, as parsed (turned into a response format by responseFormatOf). */
export const responseFormatFields = { responseSchema: z.unknown().nullish(), responseSchemaName: z.string().nullish() };

/** A message's response format from its input fields (BAD_USER_INPUT when the schema is not storable JSON of an object, or a name comes alone). */
export function responseFormatOf(p: { responseSchema?: unknown; responseSchemaName?: string | null }): ResponseFormat | undefined {
  if (p.responseSchema == null) {
    if (p.responseSchemaName != null) throw badInput('responseSchemaName needs a responseSchema');
    return undefined;
  }
  const unstorable = unstorableReason(p.responseSchema, MAX_SCHEMA_DEPTH);
  if (unstorable) throw badInput(`responseSchema: ${unstorable}`);
  const r = responseFormatSchema.safeParse({ schema: p.responseSchema, ...(p.responseSchemaName != null ? { name: p.responseSchemaName } : {}) });
  if (r.success) return r.data;
  // The codec's field names as the input spells them.
  const field = (path: PropertyKey[]) => [path[0] === 'name' ? 'responseSchemaName' : 'responseSchema', ...path.slice(1).map(String)].join('.');
  throw badInput(r.error.issues.map((i) => `${field(i.path)}: ${i.message}`).join('; '));
}

const MAX_SCHEMA_DEPTH = 64;
