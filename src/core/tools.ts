import { unstorableReason } from './storable.ts';

/** What running a tool may do to the world; drives retry advice after repair. */
export const TOOL_EFFECTS = ['read-only', 'idempotent', 'side-effects'] as const;
export type ToolEffect = (typeof TOOL_EFFECTS)[number];

/**
 * How a tool touches the session's file workspace: `only` — its
 * effects are the workspace's files and nothing else (the built-in file
 * tools); `also` — it changes the workspace's files and may act outside it
 * (the shell). Either way its file changes are recorded with its result.
 */
export const FILE_SCOPES = ['only', 'also'] as const;
export type FileScope = (typeof FILE_SCOPES)[number];

/** Looks up a tool's declared effect by name; undefined for an unknown tool. */
export type ToolEffectLookup = (toolName: string) => ToolEffect | undefined;

/**
 * Whether a session's tool set (session/tools: names, `<server>__*` or `*`)
 * admits a tool. No set recorded: every tool.
 */
export function toolAllowed(name: string, set: readonly string[] | undefined): boolean {
  if (!set) return true;
  return set.some((entry) => entry === '*' || entry === name || (entry.endsWith('__*') && name.startsWith(entry.slice(0, -1))));
}

/** Whether a session's tool set admits any tool of an MCP server (`*`, `<server>__*`, or one of its tools by name). */
export function serverAllowed(server: string, set: readonly string[] | undefined): boolean {
  if (!set) return true;
  return set.some((entry) => entry === '*' || entry.startsWith(`${server}__`));
}

/** MCP's behaviour hints on a tool (the spec's ToolAnnotations). */
export interface ToolAnnotations {
  readOnlyHint?: boolean;
  idempotentHint?: boolean;
  destructiveHint?: boolean;
  openWorldHint?: boolean;
}

/**
 * A tool's effect from its MCP annotations (docs/contract.md#agent-loop): `readOnlyHint` →
 * read-only; else `idempotentHint` → idempotent; else side-effects (the spec's
 * defaults assume the worst). Hints are only hints: an untrusted server's
 * never make an effect weaker than side-effects. The operator's `override`
 * (config) wins over both.
 */
export function effectFromAnnotations(annotations: ToolAnnotations | undefined, opts: { trusted: boolean; override?: ToolEffect }): ToolEffect {
  if (opts.override) return opts.override;
  if (!opts.trusted) return 'side-effects';
  if (annotations?.readOnlyHint === true) return 'read-only';
  if (annotations?.idempotentHint === true) return 'idempotent';
  return 'side-effects';
}

/** A tool's input or output schema, as JSON text, at most: an MCP server's (a larger one leaves the tool out) and a runner's declared tool's (refused). */
export const MAX_TOOL_SCHEMA_CHARS = 65_536;
/** A tool's schema nested deeper is not used (MCP) or refused (a runner's declared tool). */
export const MAX_TOOL_SCHEMA_DEPTH = 32;

/**
 * Why a tool's JSON Schema cannot be offered to a model (too deep, too large,
 * not storable), or undefined: one rule for every tool from outside, an MCP
 * server's and an external runner's declared ones, since each is sent with
 * every model request of its sessions and read back by Session.tools.
 */
export function toolSchemaProblem(schema: unknown): string | undefined {
  const depth = unstorableReason(schema, MAX_TOOL_SCHEMA_DEPTH);
  if (depth) return `its schema is ${depth.startsWith('nested') ? depth : 'not storable text'}`;
  const size = JSON.stringify(schema)?.length ?? 0;
  if (size > MAX_TOOL_SCHEMA_CHARS) return `its schema is ${size} characters (at most ${MAX_TOOL_SCHEMA_CHARS})`;
  return undefined;
}
