// MCP tools as the agent's tools: offered to the model as `<server>__<tool>`,
// their effect from annotations as the operator's config allows (docs/contract.md#agent-loop),
// their arguments checked against the tool's input schema before the call,
// their results screened at the door (mcp-result.ts) and turned into text for
// the model (the screened result is kept in the log beside it,
// `plugin/mcp/result`, for clients).
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { Ajv } from 'ajv';
import { default as addFormats } from 'ajv-formats';
import { LRUCache } from 'lru-cache';
import { RE2 } from 're2-wasm';
import { withoutSecrets } from '../../core/secrets.ts';
import { effectFromAnnotations, type FileScope } from '../../core/tools.ts';
import { ToolError, type Tool } from '../tools.ts';
import type { FileWorkspace } from '../file-workspace.ts';
import type { CallToolResult, McpServerConnection, McpToolInfo } from './mcp-server.ts';
import { MCP_NAME_SEPARATOR } from './mcp-config.ts';
import { resultText, screenResult } from './mcp-result.ts';

/** The event that keeps a call's whole MCP result (text, structured content, images, links). */
export const MCP_RESULT = 'plugin/mcp/result';
/** A server's error message, or a progress message, as far as it is read (the rest is cut). */
const MAX_MESSAGE_CHARS = 2000;
/** A call's progress is passed on at most this often (a server may send thousands a second). */
const PROGRESS_INTERVAL_MS = 100;

const cut = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…` : s);

/** A compiled schema's check (the MCP SDK's validator function). */
type SchemaCheck = ReturnType<AjvJsonSchemaValidator['getValidator']>;

/** Schemas one Ajv compiles before the next takes over (Ajv keeps every schema it compiled): two full lists of a server's. */
const SCHEMAS_PER_COMPILER = 2000;

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

/**
 * The CPU one server's schemas may take to compile in a window (SchemaValidators): a schema at MAX_SCHEMA_NODES still
 * takes 0.1–0.6 s, and a server lists 256 KiB of tools (about 20 such) again at every `tools/list_changed` (at most once a
 * second), each time with schemas of new content: without it, one server held the event loop in such stretches, one
 * after the other, for as long as it kept changing its list. A server of 1,000 plain tools compiles in 1–2 s.
 */
export const COMPILE_BUDGET = { cpuMs: 5_000, windowMs: 60_000 };

/** A schema not compiled because its server spent its COMPILE_BUDGET: its tool is offered from `retryAt` on, if compiled then. */
export class CompileBudgetSpent extends Error {
  constructor(
    readonly retryAt: number,
    budget: typeof COMPILE_BUDGET,
  ) {
    super(`its server's schemas took more than ${budget.cpuMs} ms of CPU to compile within ${budget.windowMs / 1000} s: not compiled now`);
  }
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
    // `code` names the engine in standalone code, which forkline does not generate.
    code: { regExp: Object.assign((pattern: string, flags: string) => new RE2(pattern, flags), { code: 'RE2' }) },
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
  /** When the budget's window began, and the CPU (µs) compiles took in it. */
  private windowStart = -Infinity;
  private spentMicros = 0;

  constructor(private readonly budget = COMPILE_BUDGET) {}

  /** The check of a schema; throws for a schema Ajv cannot compile, and CompileBudgetSpent (not kept: asked again later, it may compile). */
  check(schema: Record<string, unknown>): SchemaCheck {
    const key = JSON.stringify(schema);
    let check = this.byContent.get(key);
    if (!check) {
      const now = Date.now();
      if (now - this.windowStart >= this.budget.windowMs) {
        this.windowStart = now;
        this.spentMicros = 0;
      }
      if (this.spentMicros >= this.budget.cpuMs * 1000) throw new CompileBudgetSpent(this.windowStart + this.budget.windowMs, this.budget);
      // CPU, not wall time: a loaded machine does not spend a server's budget for it.
      const before = process.cpuUsage();
      check = this.compile(schema);
      const used = process.cpuUsage(before);
      this.spentMicros += used.user + used.system;
      this.byContent.set(key, check);
    }
    if (check instanceof Error) throw check;
    return check;
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

export function mcpTool(
  server: McpServerConnection,
  info: McpToolInfo,
  opts: {
    trusted: boolean;
    effect?: Tool['effect'];
    /** Its calls need approval (docs/contract.md#tool-approval). */
    approval?: boolean;
    timeoutMs?: number;
    /**
     * A workspace server (mcp-config.ts `workspace`): each call goes to the session's own instance, started in its
     * directory `dir` as `files` made it last (a directory made again is another directory: file-workspace.ts), held
     * to its limits for as long as it runs (tool-catalog.ts); throws a ToolError saying why it was stopped between calls.
     */
    workspace?: { files: FileScope; connectionFor: (sessionId: string, files: FileWorkspace, dir: string) => McpServerConnection };
    /** The compiled schemas of the server `info` is from. */
    validators: SchemaValidators;
  },
): Tool {
  const name = `${server.name}${MCP_NAME_SEPARATOR}${info.name}`;
  const effect = effectFromAnnotations(info.annotations, { trusted: opts.trusted, override: opts.effect });
  // Throws for a schema Ajv cannot compile: the catalog leaves that tool out (its size and depth are bounded: mcp-tool-list.ts).
  const validate = opts.validators.check(info.inputSchema);
  const validateOutput = info.outputSchema && opts.validators.check(info.outputSchema);
  return {
    name,
    description: info.description ?? info.title ?? info.name,
    parameters: info.inputSchema as Record<string, unknown>,
    effect,
    server: server.name,
    ...(opts.workspace ? { files: opts.workspace.files } : {}),
    ...(opts.approval ? { approval: true } : {}),
    async run(args, ctx) {
      const checked = validate(args);
      if (!checked.valid) throw new ToolError(`invalid arguments for ${name}: ${checked.errorMessage}`);
      let connection = server;
      if (opts.workspace) {
        if (!ctx.files) throw new ToolError('this process has no file workspaces');
        // What it holds of the disk is held to the quota while its process lives, as a shell command's while it runs
        // (disk-watch.ts): past it during the call the server is killed, the call is an error ("stopped: …") and its
        // file changes are undone (the capture refuses them).
        connection = opts.workspace.connectionFor(ctx.sessionId, ctx.files, await ctx.files.ready());
      }
      const onProgress = ctx.onProgress;
      // A server's progress reaches subscribers (and other processes) at most every PROGRESS_INTERVAL_MS, its text cut.
      let progressAt = -Infinity;
      const progress = (p: { progress: number; total?: number; message?: string }) => {
        const now = performance.now();
        if (!onProgress || now - progressAt < PROGRESS_INTERVAL_MS) return;
        progressAt = now;
        onProgress({ ...p, ...(p.message === undefined ? {} : { message: cut(String(p.message), MAX_MESSAGE_CHARS) }) });
      };
      let result: CallToolResult;
      try {
        result = await connection.callTool(info.name, (args ?? {}) as Record<string, unknown>, {
          signal: ctx.signal,
          timeoutMs: opts.timeoutMs ?? ctx.timeoutMs,
          ...(onProgress ? { onProgress: progress } : {}),
        });
      } catch (err) {
        // A workspace server's call that ran out of time (its own timeout, or the agent's aborting it) stops the
        // server with what it started, as the shell's timeout stops its command (docs/files.md): what it wrote until
        // then is recorded with the call's error result, and nothing it would go on writing lands in the files after
        // that result, where a fork at it would not have it. The next call starts it again.
        if (opts.workspace && (ctx.signal.aborted || (err instanceof McpError && err.code === ErrorCode.RequestTimeout)))
          connection.stop(`the call of ${info.name} ended unanswered (timed out, or its turn stopped): its server was stopped`);
        if (err instanceof ToolError) throw err; // forkline's own words (stopped past its quota)
        // A server's error message is its text: bounded as a result's is, not megabytes in the log and the next request.
        // Nor the secrets its config has forkline send it (core/secrets.ts).
        throw new ToolError(`tool failed: ${cut(withoutSecrets((err as Error).message ?? String(err), server.secrets), MAX_MESSAGE_CHARS)}`);
      }
      // Screened at the door: what is kept and what the model reads are bounded and checked (mcp-result.ts).
      const kept = screenResult(result);
      ctx.record?.({ type: MCP_RESULT, data: { server: server.name, tool: info.name, result: kept } });
      const text = resultText(result, kept);
      if (result.isError) throw new ToolError(text || `${name} reported an error`);
      if (validateOutput) {
        // A tool with an output schema answers structured content that matches it (the MCP specification).
        if (!result.structuredContent) throw new ToolError(`${name} has an output schema but did not return structured content`);
        const checked = validateOutput(result.structuredContent);
        if (!checked.valid)
          throw new ToolError(`${name}: structured content does not match its output schema: ${cut(checked.errorMessage, MAX_MESSAGE_CHARS)}`);
      }
      return text;
    },
  };
}
