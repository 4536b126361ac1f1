// Built-in tools (DESIGN §6). Each declares its effect, which drives the retry
// advice that repair writes into synthetic results.
import fs from 'node:fs/promises';
import path from 'node:path';
import { z } from 'zod';
import type { ToolDefinition } from '../core/chat.ts';
import type { ToolEffect } from '../core/tools.ts';

export interface ToolContext {
  sessionId: string;
  signal: AbortSignal;
  /** The session's sandbox folder (created on demand). */
  sandbox: string;
  now: () => Date;
}

export interface Tool extends ToolDefinition {
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

type Notes = Record<string, { value: string; writes: number }>;
const notesFile = (ctx: ToolContext) => path.join(ctx.sandbox, 'notes.json');
async function readNotes(ctx: ToolContext): Promise<Notes> {
  try {
    return JSON.parse(await fs.readFile(notesFile(ctx), 'utf8'));
  } catch {
    return {};
  }
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
      const note = (await readNotes(ctx))[key];
      if (!note) throw new ToolError(`no note named "${key}"`);
      return note.value;
    },
  }),
  tool({
    name: 'note_write',
    description: "Writes a note to the session's note store (a side effect).",
    args: z.strictObject({
      key: z.string().min(1).max(200),
      value: z.string().max(100_000),
      delayMs: z.number().int().min(0).max(600_000).optional().describe('Keeps the call in flight after the write (to exercise crash repair).'),
    }),
    effect: 'side-effects',
    run: async ({ key, value, delayMs }, ctx) => {
      await fs.mkdir(ctx.sandbox, { recursive: true });
      const notes = await readNotes(ctx);
      notes[key] = { value, writes: (notes[key]?.writes ?? 0) + 1 };
      // Write then rename: a crash mid-write must not leave a truncated note store.
      const tmp = `${notesFile(ctx)}.${process.pid}.${Date.now()}.tmp`;
      await fs.writeFile(tmp, JSON.stringify(notes, null, 2));
      await fs.rename(tmp, notesFile(ctx));
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
