// MCP tool schemas compiled into checks (docs/mcp.md "Names, arguments, results"). Only the schema worker runs this
// (schema-worker.ts): a compile, and a check, of a server's schema may take seconds, which the process's event loop
// does not wait for (schema-checks.ts).
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { Ajv } from 'ajv';
import { default as addFormats } from 'ajv-formats';
import { LRUCache } from 'lru-cache';
import { patternEngine } from './pattern-engine.ts';

/** A compiled schema's check (the MCP SDK's validator function). */
export type SchemaCheck = ReturnType<AjvJsonSchemaValidator['getValidator']>;

/** Schemas one Ajv compiles before the next takes over (Ajv keeps every schema it compiled): two full lists of a server's. */
export const SCHEMAS_PER_COMPILER = 2000;

/**
 * A schema's JSON objects and their keys (keywords, property names) together, at most: Ajv's compile time grows with
 * them (a 64 KiB schema of 2,500 properties held the event loop 1.3 s and more; 497 properties of five keywords each,
 * 45 KiB, 1.3 s on a loaded machine), and a schema of more is refused before compiling.
 */
export const MAX_SCHEMA_NODES = 1000;

/** How many JSON objects and keys a schema holds, counting up to `max + 1` (its depth is bounded before: mcp-tool-list.ts). */
function schemaNodes(value: unknown, max: number): number {
  let count = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && count <= max) {
    const v = stack.pop();
    if (v === null || typeof v !== 'object') continue;
    if (!Array.isArray(v)) count += 1 + Object.keys(v).length;
    for (const child of Object.values(v)) if (child !== null && typeof child === 'object') stack.push(child);
  }
  return count;
}

/** `compile(schema)` kept by the schema's content (its JSON text): asked again, the same check, or the same error thrown. */
export function keptByContent<C extends object>(
  kept: LRUCache<string, C | Error>,
  schema: Record<string, unknown>,
  compile: (schema: Record<string, unknown>) => C | Error,
): C {
  const key = JSON.stringify(schema);
  let check = kept.get(key);
  if (!check) {
    check = compile(schema);
    kept.set(key, check);
  }
  if (check instanceof Error) throw check;
  return check;
}

/**
 * An Ajv as the MCP SDK makes its own (docs/mcp.md "Names, arguments, results"), but bounded against a server's
 * schema: a `$ref` is compiled as a call, never inlined (100 refs to one subschema of 200 properties, 7.6 KiB,
 * compiled 100 copies of it: 7 s of the event loop and 170 MB), and `pattern`/`patternProperties` run on RE2,
 * whose time is linear in the text (`^(a+)+$` against 30 `a`s and a `!` backtracked for minutes on the JavaScript
 * engine while a call's arguments were checked). A pattern RE2 does not take (lookaround, backreferences) fails
 * the schema's compile: its tool is not offered.
 */
function boundedAjv(): AjvJsonSchemaValidator {
  const ajv = new Ajv({
    strict: false,
    validateFormats: true,
    validateSchema: false,
    allErrors: true,
    inlineRefs: false,
    code: { regExp: patternEngine },
  });
  (addFormats as unknown as (a: Ajv) => void)(ajv);
  return new AjvJsonSchemaValidator(ajv as never);
}

/**
 * One server's compiled schemas, by their content (the schema's JSON text): a
 * server that lists its tools again (every `tools/list_changed`, at most once a
 * second) costs the text of its schemas, not compiling them again. A server's
 * schemas are compiled apart from another's, so a `$id` is its own server's (Ajv
 * keeps a schema by its `$id`: another server's tool of the same `$id` stood in
 * for it); a schema whose `$id` its compiler already holds with other content is
 * compiled by a fresh one, as is every schema once SCHEMAS_PER_COMPILER were
 * (the schemas Ajv keeps go with the last check that uses them).
 */
export class SchemaValidators {
  private compiler = boundedAjv();
  /** Schemas the compiler compiled, and the `$id`s they gave it. */
  private compiled = 0;
  private readonly ids = new Set<string>();
  /** The check of each schema, or why it cannot be compiled (asked again, it fails at once). */
  private readonly byContent = new LRUCache<string, SchemaCheck | Error>({ max: SCHEMAS_PER_COMPILER });

  /** The check of a schema; throws for a schema Ajv cannot compile. */
  check(schema: Record<string, unknown>): SchemaCheck {
    return keptByContent(this.byContent, schema, (s) => this.compile(s));
  }

  private compile(schema: Record<string, unknown>): SchemaCheck | Error {
    const nodes = schemaNodes(schema, MAX_SCHEMA_NODES);
    if (nodes > MAX_SCHEMA_NODES) return new Error(`its schema has more than ${MAX_SCHEMA_NODES} objects and keys: not compiled`);
    const id = typeof schema.$id === 'string' ? schema.$id : undefined;
    if (this.compiled >= SCHEMAS_PER_COMPILER || (id !== undefined && this.ids.has(id))) this.renew();
    for (;;) {
      try {
        const check = this.compiler.getValidator(schema as never);
        this.compiled++;
        if (id !== undefined) this.ids.add(id);
        return check;
      } catch (err) {
        // A `$id` inside it that an earlier schema gave this compiler: compiled alone, by a fresh one (a second failure is the schema's).
        if (this.compiled === 0) return err instanceof Error ? err : new Error(String(err));
        this.renew();
      }
    }
  }

  private renew(): void {
    this.compiler = boundedAjv();
    this.compiled = 0;
    this.ids.clear();
  }
}
