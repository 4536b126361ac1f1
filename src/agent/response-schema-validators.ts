// Response schemas (docs/agents.md "Structured output") compiled into checks. Only the schema worker runs this
// (mcp/schema-worker.ts), as it does MCP tool schemas: the schema and the answer checked against it are the caller's
// (the answer follows the caller's message), and both a compile (RE2's of a large counted class,
// `^[\x{0}-\x{10ffff}]{1000}$`, ~0.1 s a pattern: a 32,000-character schema holds hundreds) and a check may take
// long, which the process's event loop does not wait for (mcp/schema-checks.ts bounds each in time).
import { Ajv } from 'ajv';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';
import { LRUCache } from 'lru-cache';
import { patternEngine } from './mcp/pattern-engine.ts';
import { keptByContent } from './mcp/schema-validators.ts';
import { DRAFT_7 } from './response-schema-drafts.ts';

/** A value checked against a compiled response schema: why it does not match, when it does not. */
export type ResponseCheck = (value: unknown) => { valid: true } | { valid: false; errorMessage: string };

/**
 * Draft 2020-12 unless the schema names draft-07 or -06 (what zod, Pydantic and most tools emit is one of these). A
 * `pattern` runs on RE2, in time linear in the text (on the JavaScript engine `^(a+)+$` against 40 `a`s and a `!`
 * held the process for hours), and a `$ref` is compiled as a call, never inlined.
 */
const options = {
  allErrors: true,
  strict: false,
  logger: false,
  inlineRefs: false,
  code: { regExp: patternEngine },
} as const;

/** Schemas one pair of compilers compiles before a fresh pair takes over (Ajv keeps every schema it compiled, by `$id` too). */
const SCHEMAS_PER_COMPILER = 200;

export class ResponseSchemaValidators {
  private compiled = 0;
  private draft2020 = addFormats.default(new Ajv2020(options));
  private draft7 = addFormats.default(new Ajv(options));
  private readonly byContent = new LRUCache<string, ResponseCheck | Error>({ max: SCHEMAS_PER_COMPILER });

  /** The check of a schema; throws for one Ajv cannot compile. */
  check(schema: Record<string, unknown>): ResponseCheck {
    return keptByContent(this.byContent, schema, (s) => this.compile(s));
  }

  private compile(schema: Record<string, unknown>): ResponseCheck | Error {
    if (this.compiled >= SCHEMAS_PER_COMPILER) {
      this.draft2020 = addFormats.default(new Ajv2020(options));
      this.draft7 = addFormats.default(new Ajv(options));
      this.compiled = 0;
    }
    const ajv = typeof schema.$schema === 'string' && DRAFT_7.test(schema.$schema) ? this.draft7 : this.draft2020;
    try {
      const validate = ajv.compile(schema);
      this.compiled++;
      return (value) => {
        if (validate(value)) return { valid: true };
        const why = (validate.errors ?? [])
          .map((e: { instancePath: string; message?: string }) => `${e.instancePath || '/'} ${e.message ?? 'is invalid'}`)
          .join('; ');
        return { valid: false, errorMessage: why };
      };
    } catch (err) {
      return err instanceof Error ? err : new Error(String(err));
    }
  }
}
