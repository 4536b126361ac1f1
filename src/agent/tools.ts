// Built-in tools (DESIGN §6). Each declares its effect, which drives the retry
// advice that repair writes into synthetic results.
//
// The notes tools keep their state in the session's log, not in files: the
// workspace (issue 17). note_write asks for a write, which the runner stores
// as a `plugin/workspace/write` event in the same append as the call's `ok`
// result (an error result stores none); note_read answers from the log as of
// now, inherited writes included (store/session-log.ts `workspaceEntry`). So a
// fork sees exactly the notes written before its cut, a write whose result was
// never recorded (a crash, a fork before the result) is absent, and deleting a
// session deletes its notes.
import { z } from 'zod';
import type { ToolDefinition } from '../core/chat.ts';
import type { ToolEffect } from '../core/tools.ts';

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
  /** Keeps a plugin event in the log right before the call's result, in the same append (ok or error). */
  record?: (event: { type: `plugin/${string}`; data: Record<string, unknown> }) => void;
}

export interface Tool extends ToolDefinition {
  /** The MCP server it comes from; unset: built in. */
  server?: string;
  run(args: unknown, ctx: ToolContext): Promise<string>;
}

/** A tool failure the model should see as an `error` result. */
export class ToolError extends Error {
  name = 'ToolError';
}

/**
 * A tool from one zod schema of its arguments: the JSON Schema the model sees
 * is generated from it, and `run` gets the arguments parsed by it (invalid
 * ones are the model's error, an `error` result naming them).
 */
function tool<T extends z.ZodObject>(def: {
  name: string;
  description: string;
  args: T;
  effect: ToolEffect;
  run: (args: z.infer<T>, ctx: ToolContext) => Promise<string>;
}): Tool {
  const { $schema: _, ...parameters } = z.toJSONSchema(def.args);
  return {
    name: def.name,
    description: def.description,
    parameters,
    effect: def.effect,
    run: (raw, ctx) => {
      const r = def.args.safeParse(raw);
      if (!r.success) throw new ToolError(`invalid arguments: ${r.error.issues.map((i) => `${i.path.join('.') || 'arguments'}: ${i.message}`).join('; ')}`);
      return def.run(r.data, ctx);
    },
  };
}

function abortableSleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const t = setTimeout(resolve, ms);
    signal.addEventListener('abort', () => (clearTimeout(t), reject(signal.reason)), { once: true });
  });
}

export const BUILTIN_TOOLS: Tool[] = [
  tool({
    name: 'clock',
    description: 'Current date and time (ISO 8601, UTC).',
    args: z.strictObject({}),
    effect: 'read-only',
    run: async (_args, ctx) => ctx.now().toISOString(),
  }),
  tool({
    name: 'sleep',
    description: 'Waits for `ms` milliseconds, then answers.',
    args: z.strictObject({ ms: z.number().int().min(0).max(600_000) }),
    effect: 'read-only',
    run: async ({ ms }, ctx) => {
      await abortableSleep(ms, ctx.signal);
      return `slept ${ms} ms`;
    },
  }),
  tool({
    name: 'note_read',
    description: "Reads a note from the session's note store.",
    args: z.strictObject({ key: z.string().min(1).max(200) }),
    effect: 'idempotent',
    run: async ({ key }, ctx) => {
      const value = await ctx.workspace.read(key);
      if (value === undefined) throw new ToolError(`no note named "${key}"`);
      return value;
    },
  }),
  tool({
    name: 'note_write',
    description: "Writes a note to the session's note store (a side effect).",
    args: z.strictObject({
      key: z.string().min(1).max(200),
      value: z.string().max(100_000),
      delayMs: z.number().int().min(0).max(600_000).optional().describe('Keeps the call in flight before its write is recorded (to exercise crash repair).'),
    }),
    effect: 'side-effects',
    run: async ({ key, value, delayMs }, ctx) => {
      if (!(await ctx.workspace.hasRoomFor(key))) throw new ToolError(`the note store is full (${WORKSPACE_MAX_KEYS} notes): overwrite an existing note instead`);
      ctx.workspace.write(key, value);
      if (delayMs) await abortableSleep(delayMs, ctx.signal);
      return `wrote note "${key}"`;
    },
  }),
];

const BY_NAME = new Map(BUILTIN_TOOLS.map((t) => [t.name, t]));
export const findTool = (name: string) => BY_NAME.get(name);
export const toolEffectOf = (name: string): ToolEffect | undefined => BY_NAME.get(name)?.effect;
export const toolDefinitions = (): ToolDefinition[] =>
  BUILTIN_TOOLS.map(({ name, description, parameters, effect }) => ({ name, description, parameters, effect }));
