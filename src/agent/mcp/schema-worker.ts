// The schema worker: a worker thread that compiles MCP servers' tool schemas and checks values against them
// (schema-validators.ts), so that neither holds the process's event loop (schema-checks.ts starts it, bounds each
// request's time and starts it again when one runs past that).
import { parentPort } from 'node:worker_threads';
import { LRUCache } from 'lru-cache';
import { patternHeapFull, PatternTextTooLong } from './pattern-engine.ts';
import { SCHEMAS_PER_COMPILER, SchemaValidators, type SchemaCheck } from './schema-validators.ts';
import { ResponseSchemaValidators, type ResponseCheck } from '../response-schema-validators.ts';

/** Which rules a schema is compiled by: an MCP tool's (schema-validators.ts) or a message's response schema's. */
export type SchemaDialect = 'mcp' | 'response';

/** What the process asks: compile a server's schema as `handle`, or check a value against the schema of `handle`. */
export type SchemaRequest =
  | { id: number; op: 'compile'; server: string; dialect: SchemaDialect; handle: number; schema: Record<string, unknown> }
  | { id: number; op: 'check'; handle: number; value: unknown };

/**
 * Its answers: the compile's time (ms) and its error if any; a check's result, or `missing` (this worker did not compile
 * it); `heapFull`: the pattern engine's heap filled up during the request (pattern-engine.ts), so neither its answer nor
 * this worker can be used (a fresh one takes the request again).
 */
export type SchemaAnswer =
  | { ready: true }
  | { id: number; heapFull: true }
  | { id: number; ms: number; error?: string }
  | { id: number; missing: true }
  | { id: number; valid: true }
  | { id: number; valid: false; errorMessage: string };

/** Checks by handle: as many as the servers' compilers keep, about (a check forgotten is compiled again when asked). */
const MAX_CHECKS = 10 * SCHEMAS_PER_COMPILER;

const port = parentPort;
if (port) {
  const servers = new Map<string, SchemaValidators | ResponseSchemaValidators>();
  const checks = new LRUCache<number, SchemaCheck | ResponseCheck>({ max: MAX_CHECKS });
  const answer = (req: SchemaRequest): SchemaAnswer => {
    if (req.op === 'check') {
      const check = checks.get(req.handle);
      if (!check) return { id: req.id, missing: true };
      let result: ReturnType<SchemaCheck | ResponseCheck>;
      try {
        result = check(req.value);
      } catch (err) {
        if (!(err instanceof PatternTextTooLong)) throw err;
        result = { valid: false, errorMessage: err.message };
      }
      return result.valid ? { id: req.id, valid: true } : { id: req.id, valid: false, errorMessage: result.errorMessage };
    }
    let validators = servers.get(req.server);
    if (!validators) servers.set(req.server, (validators = req.dialect === 'response' ? new ResponseSchemaValidators() : new SchemaValidators()));
    const started = performance.now();
    try {
      checks.set(req.handle, validators.check(req.schema));
      return { id: req.id, ms: performance.now() - started };
    } catch (err) {
      return { id: req.id, ms: performance.now() - started, error: err instanceof Error ? err.message : String(err) };
    }
  };
  port.on('message', (req: SchemaRequest) => {
    try {
      const answered = answer(req);
      if (!patternHeapFull()) return port.postMessage(answered);
    } catch (err) {
      // Any other failure ends the worker: schema-checks.ts fails the request and starts a fresh one.
      if (!patternHeapFull()) throw err;
    }
    port.postMessage({ id: req.id, heapFull: true } satisfies SchemaAnswer);
  });
  port.postMessage({ ready: true } satisfies SchemaAnswer);
}
