// FORKLINE_MCP_CONFIG: the MCP servers the agent may use, in the shape Claude
// Code, Codex, Cursor and the OpenAI Agents SDK read (`{"mcpServers": {...}}`),
// plus forkline's own keys: `trusted`, `effect`, `approval`, `tools.<name>.effect` and `tools.<name>.approval`
// (docs/contract.md#agent-loop), a call timeout, and the tenants allowed to use a server.
import fs from 'node:fs';
import { z } from 'zod';
import { FILE_SCOPES, TOOL_EFFECTS } from '../../core/tools.ts';

const effect = z.enum(TOOL_EFFECTS);

/** Separates a server's name from its tool's in the name the model sees. */
export const MCP_NAME_SEPARATOR = '__';

/** A server's name becomes the prefix of its tools' names (`<server>__<tool>`): no `__` inside it. */
const serverName = z
  .string()
  .regex(/^[A-Za-z0-9-]+(_[A-Za-z0-9-]+)*$/, 'a server name is letters, digits, - and single _ (its tools are offered as <server>__<tool>)')
  .max(40);

const common = {
  /** Hints (annotations) of an untrusted server never make an effect weaker than side-effects. */
  trusted: z.boolean().default(true),
  /** The effect of every tool of this server, whatever its annotations say. */
  effect: effect.optional(),
  /** Per tool: its effect, whatever its annotations say, and whether its calls need approval (docs/mcp.md). */
  tools: z.record(z.string(), z.strictObject({ effect: effect.optional(), approval: z.boolean().optional() })).default({}),
  /** Every call of this server's tools needs a person's approval before it runs (docs/contract.md#tool-approval); a tool's own `approval` wins. */
  approval: z.boolean().optional(),
  /** A call that takes longer is an `error` result (default: the agent's tool timeout). */
  timeoutMs: z.number().int().positive().max(3_600_000).optional(),
  /**
   * In the default tool set of a session that names none (docs/mcp.md): once any server of
   * the config says `default`, only those marked true are; when none does, every server is.
   */
  default: z.boolean().optional(),
  /** Tenants whose sessions may use this server (default: every tenant). */
  tenants: z.array(z.string().min(1)).optional(),
  /** Other hosts' keys that mean nothing here. */
  disabled: z.boolean().optional(),
};

const stdioServer = z.strictObject({
  type: z.literal('stdio').optional(),
  command: z.string().min(1),
  args: z.array(z.string()).default([]),
  /**
   * The server works in a session's file workspace (docs/files.md): started once
   * per session, `${workspace}` in its args, cwd and env values standing for the session's
   * directory, its changes recorded with each call's result. `only`: its tools
   * touch nothing but those files (server-filesystem); `also`: they may act elsewhere.
   */
  workspace: z.enum(FILE_SCOPES).optional(),
  /** The only environment the server gets besides HOME, PATH, USER, SHELL, TERM, LOGNAME. */
  env: z.record(z.string(), z.string()).default({}),
  cwd: z.string().optional(),
  /**
   * Run the server in bubblewrap, as the shell runs (docs/mcp.md): the system's
   * programs read-only, its workspace (or a private HOME) writable, nothing else
   * of the host, no network. `readOnly` adds paths it needs (its own code),
   * `network` gives it the host's network. Where no sandbox can be made the
   * server is not started (reported, never run without one).
   */
  sandbox: z
    .union([
      z.boolean(),
      z.strictObject({
        readOnly: z.array(z.string().startsWith('/', 'an absolute path')).default([]),
        network: z.boolean().default(false),
      }),
    ])
    .optional(),
  ...common,
});

const httpServer = z.strictObject({
  type: z.enum(['http', 'streamable-http', 'streamableHttp']).optional(),
  url: z.url({ protocol: /^https?$/ }),
  headers: z.record(z.string(), z.string()).default({}),
  ...common,
});

const fileSchema = z.strictObject({ mcpServers: z.record(serverName, z.record(z.string(), z.unknown())) });

export type McpServerConfig = z.infer<typeof stdioServer> | z.infer<typeof httpServer>;
export interface McpConfig {
  mcpServers: Record<string, McpServerConfig>;
}
export const isStdioServer = (c: McpServerConfig): c is z.infer<typeof stdioServer> => 'command' in c;

const issuesText = (error: z.ZodError, prefix: string[]) => error.issues.map((i) => `${[...prefix, ...i.path].join('.') || '(top)'}: ${i.message}`).join('; ');

/** Parses a config (the file's text); throws an Error naming the file and each problem. */
export function parseMcpConfig(text: string, source = 'FORKLINE_MCP_CONFIG'): McpConfig {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (err) {
    throw new Error(`${source}: not valid JSON (${(err as Error).message})`, { cause: err });
  }
  const file = fileSchema.safeParse(json);
  if (!file.success) throw new Error(`${source}: ${issuesText(file.error, [])}`);
  const config: McpConfig = { mcpServers: {} };
  const problems: string[] = [];
  for (const [name, raw] of Object.entries(file.data.mcpServers)) {
    // The kind by its key, so a mistake is named in the kind's terms (not "no union member matched").
    const schema = 'command' in raw ? stdioServer : 'url' in raw ? httpServer : undefined;
    if (!schema) {
      problems.push(`mcpServers.${name}: needs a "command" (stdio) or a "url" (Streamable HTTP)`);
      continue;
    }
    const r = schema.safeParse(raw);
    if (!r.success) problems.push(issuesText(r.error, ['mcpServers', name]));
    else if (!r.data.disabled) config.mcpServers[name] = r.data;
  }
  if (problems.length) throw new Error(`${source}: ${problems.join('; ')}`);
  return config;
}

export function loadMcpConfig(file: string): McpConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`FORKLINE_MCP_CONFIG: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? (err as Error).message})`, { cause: err });
  }
  return parseMcpConfig(text, `FORKLINE_MCP_CONFIG (${file})`);
}
