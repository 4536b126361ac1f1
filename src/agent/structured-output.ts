// Structured output (docs/agents.md "Structured output"): an input may ask for
// an answer matching a JSON Schema. The schema is checked as a JSON Schema
// where the input comes in, sent to the provider the way its API takes one
// (the AI SDK's `responseFormat`: models/language-model.ts), and the final
// answer is parsed and validated against it here; the parsed value is stored
// with the answer (model/message `output`), a mismatch fails the turn.
import { Ajv, type ValidateFunction } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { LRUCache } from 'lru-cache';
import { RE2 } from 're2-wasm';
import { badInput } from '../core/errors.ts';
import type { ResponseFormat } from '../core/events.ts';
import { unstorableReason } from '../core/storable.ts';

/** What `plugin/agent/error`'s `code` says when the final answer does not match its input's schema. */
export const OUTPUT_MISMATCH = 'OUTPUT_SCHEMA_MISMATCH';

// Draft 2020-12 unless the schema names draft-07 or -06 (what zod, Pydantic and most tools emit is one of these).
// The schema is the caller's and the answer follows the caller's message, so a `pattern` runs on RE2, whose time is
// linear in the text (on the JavaScript engine `^(a+)+$` against 40 `a`s and a `!` held the process's event loop for
// hours), and a `$ref` is compiled as a call, never inlined (docs/agents.md "Structured output").
const options = {
  allErrors: true,
  strict: false,
  logger: false,
  inlineRefs: false,
  code: { regExp: Object.assign((pattern: string, flags: string) => new RE2(pattern, flags), { code: 'RE2' }) },
} as const;
const draft2020 = addFormats.default(new Ajv2020(options));
const draft7 = addFormats.default(new Ajv(options));
const DRAFT_7 = /^https?:\/\/json-schema\.org\/draft-0[67]\/schema#?$/;
const DRAFT_2020 = /^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/;

/** Compiled validators by schema text: a turn's steps and a session's inputs often share one. */
const compiled = new LRUCache<string, ValidateFunction>({ max: 200 });

function validatorOf(schema: ResponseFormat['schema']): ValidateFunction {
  const key = JSON.stringify(schema);
  const known = compiled.get(key);
  if (known) return known;
  const ajv = typeof schema.$schema === 'string' && DRAFT_7.test(schema.$schema) ? draft7 : draft2020;
  const v = ajv.compile(schema);
  compiled.set(key, v);
  return v;
}

/**
 * Refuses (BAD_USER_INPUT) a response schema that is not a JSON Schema the
 * validator can use, or whose root is not an object schema (OpenAI and
 * Anthropic take only objects; the stored output is always an object).
 */
export function checkResponseFormat(format: ResponseFormat): void {
  const { schema } = format;
  if (typeof schema.$schema === 'string' && !DRAFT_7.test(schema.$schema) && !DRAFT_2020.test(schema.$schema))
    throw badInput(`responseSchema: $schema ${schema.$schema} is not supported (draft 2020-12 or draft-07)`);
  if (schema.type !== 'object') throw badInput('responseSchema: the root must be an object schema ("type": "object")');
  try {
    validatorOf(schema);
  } catch (err) {
    throw badInput(`responseSchema is not a valid JSON Schema: ${(err as Error).message}`.slice(0, 1000));
  }
}

/** The final answer parsed and checked against the schema: its value, or why it does not match. */
export function validateAnswer(format: ResponseFormat, text: string): { ok: true; value: unknown } | { ok: false; reason: string } {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, reason: `the answer does not match the response schema: it is not JSON (${JSON.stringify(text.slice(0, 120))})` };
  }
  // What the log cannot hold (nested past its depth, or past its number of values) is no answer it can keep.
  const unstorable = unstorableReason(value);
  if (unstorable) return { ok: false, reason: `the answer cannot be kept as its output (${unstorable})` };
  const validate = validatorOf(format.schema);
  if (validate(value)) return { ok: true, value };
  const why = (validate.errors ?? []).map((e) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`).join('; ');
  return { ok: false, reason: `the answer does not match the response schema: ${why}`.slice(0, 2000) };
}
