// Structured output (docs/agents.md "Structured output"): an input may ask for
// an answer matching a JSON Schema. The schema is checked as a JSON Schema
// where the input comes in, sent to the provider the way its API takes one
// (the AI SDK's `responseFormat`: models/language-model.ts), and the final
// answer is parsed and validated against it here; the parsed value is stored
// with the answer (model/message `output`), a mismatch fails the turn. The
// schema and the answer are the caller's, so both the compile and the check
// run in the schema worker, bounded in time (mcp/schema-checks.ts,
// response-schema-validators.ts), each tenant's compiles within a budget.
import { ForklineError, badInput } from '../core/errors.ts';
import type { ResponseFormat } from '../core/events.ts';
import { unstorableReason } from '../core/storable.ts';
import { NotCompiledNow, type SchemaChecks } from './mcp/schema-checks.ts';
import { DRAFT_2020, DRAFT_7 } from './response-schema-drafts.ts';

/** What `plugin/agent/error`'s `code` says when the final answer does not match its input's schema. */
export const OUTPUT_MISMATCH = 'OUTPUT_SCHEMA_MISMATCH';

/**
 * Refuses (BAD_USER_INPUT) a response schema that is not a JSON Schema the
 * validator can use, or whose root is not an object schema (OpenAI and
 * Anthropic take only objects; the stored output is always an object);
 * RATE_LIMITED when the tenant's response schemas took the schema worker
 * their budget's time this minute (retry after).
 */
export async function checkResponseFormat(format: ResponseFormat, checks: SchemaChecks, tenant: string): Promise<void> {
  const { schema } = format;
  if (typeof schema.$schema === 'string' && !DRAFT_7.test(schema.$schema) && !DRAFT_2020.test(schema.$schema))
    throw badInput(`responseSchema: $schema ${schema.$schema} is not supported (draft 2020-12 or draft-07)`);
  if (schema.type !== 'object') throw badInput('responseSchema: the root must be an object schema ("type": "object")');
  try {
    await checks.check(tenant, schema, 'response');
  } catch (err) {
    // One that alone ran past the worker's time bound would again: it is refused, as a schema the validator cannot use.
    if (err instanceof NotCompiledNow && err.why === 'budget') {
      const seconds = Math.max(1, Math.ceil((err.retryAt - Date.now()) / 1000));
      throw new ForklineError('RATE_LIMITED', `this tenant's response schemas took too long to compile this minute; retry in ${seconds} s`, {
        retryAfterSeconds: seconds,
        http: { status: 429, headers: { 'Retry-After': String(seconds) } },
      });
    }
    throw badInput(`responseSchema is not a valid JSON Schema: ${(err as Error).message}`.slice(0, 1000));
  }
}

/** The final answer parsed and checked against the schema: its value, or why it does not match. */
export async function validateAnswer(
  format: ResponseFormat,
  text: string,
  checks: SchemaChecks,
  tenant: string,
): Promise<{ ok: true; value: unknown } | { ok: false; reason: string }> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { ok: false, reason: `the answer does not match the response schema: it is not JSON (${JSON.stringify(text.slice(0, 120))})` };
  }
  // What the log cannot hold (nested past its depth, or past its number of values) is no answer it can keep.
  const unstorable = unstorableReason(value);
  if (unstorable) return { ok: false, reason: `the answer cannot be kept as its output (${unstorable})` };
  let checked: Awaited<ReturnType<Awaited<ReturnType<SchemaChecks['check']>>>>;
  try {
    checked = await (await checks.check(tenant, format.schema, 'response'))(value);
  } catch (err) {
    return { ok: false, reason: `the answer could not be checked against the response schema: ${(err as Error).message}`.slice(0, 2000) };
  }
  if (checked.valid) return { ok: true, value };
  return { ok: false, reason: `the answer does not match the response schema: ${checked.errorMessage}`.slice(0, 2000) };
}
