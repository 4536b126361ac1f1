// What a tool is (docs/contract.md#agent-loop): a zod schema of its arguments, an effect, and a
// function of the arguments and the call's context. The built-ins are in
// tools.ts (file tools in file-tools.ts), MCP servers' in mcp/.
import { z } from 'zod';
import type { ToolDefinition } from '../core/chat.ts';
import type { FileScope, ToolEffect } from '../core/tools.ts';
import type { FileWorkspace } from './file-workspace.ts';
import { ToolError } from './tool-error.ts';

export { ToolError };

/** The session's workspace as a tool sees it. */
export interface ToolWorkspace {
  /** The value of a key as of now (the log, inherited writes included). */
  read(key: string): Promise<string | undefined>;
  /** Whether the workspace can take one more key (it holds at most WORKSPACE_MAX_KEYS). */
  hasRoomFor(key: string): Promise<boolean>;
  /** Asks for a write: it is stored with the call's result, and only if that result is `ok`. */
  write(key: string, value: string): void;
}

/** A workspace holds at most this many keys (a new key beyond it is refused); Session.workspace lists them all. */
export const WORKSPACE_MAX_KEYS = 1000;

export interface ToolContext {
  sessionId: string;
  signal: AbortSignal;
  /** How long the call may take (the agent's tool timeout; `signal` aborts then). */
  timeoutMs: number;
  workspace: ToolWorkspace;
  now: () => Date;
  /** Progress the tool reports while it runs (sessionTurns: TOOL_PROGRESS). */
  onProgress?: (p: { progress: number; total?: number; message?: string }) => void;
  /** The session's file workspace (file tools only; its changes are recorded with the call's result). */
  files?: FileWorkspace;
  /** Keeps a plugin event in the log right before the call's result, in the same append (ok or error). */
  record?: (event: { type: `plugin/${string}`; data: Record<string, unknown> }) => void;
}

export interface Tool extends ToolDefinition {
  /** The MCP server it comes from; unset: built in. */
  server?: string;
  /** The operator's configuration says its calls need a person's approval (docs/contract.md#tool-approval). */
  approval?: boolean;
  run(args: unknown, ctx: ToolContext): Promise<string>;
}

/**
 * A tool from one zod schema of its arguments: the JSON Schema the model sees
 * is generated from it, and `run` gets the arguments parsed by it (invalid
 * ones are the model's error, an `error` result naming them).
 */
export function tool<T extends z.ZodObject>(def: {
  name: string;
  description: string;
  args: T;
  effect: ToolEffect;
  /** It works in the session's file workspace: only there, or also outside it. */
  files?: FileScope;
  run: (args: z.infer<T>, ctx: ToolContext) => Promise<string>;
}): Tool {
  const { $schema: _, ...parameters } = z.toJSONSchema(def.args);
  return {
    name: def.name,
    description: def.description,
    parameters,
    effect: def.effect,
    ...(def.files ? { files: def.files } : {}),
    run: (raw, ctx) => {
      const r = def.args.safeParse(raw);
      if (!r.success) throw new ToolError(`invalid arguments: ${r.error.issues.map((i) => `${i.path.join('.') || 'arguments'}: ${i.message}`).join('; ')}`);
      return def.run(r.data, ctx);
    },
  };
}
