// Built-in tools (docs/contract.md#agent-loop). Each declares its effect, which drives the retry
// advice that repair writes into synthetic results.
//
// The notes tools keep their state in the session's log, not in files: the
// workspace. note_write asks for a write, which the runner stores
// as a `plugin/workspace/write` event in the same append as the call's `ok`
// result (an error result stores none); note_read answers from the log as of
// now, inherited writes included (store/session-log.ts `workspaceEntry`). So a
// fork sees exactly the notes written before its cut, a write whose result was
// never recorded (a crash, a fork before the result) is absent, and deleting a
// session deletes its notes.
import { z } from 'zod';
import type { ToolEffect } from '../core/tools.ts';
import { MAX_NOTE_KEY_CHARS, MAX_NOTE_VALUE_CHARS } from '../core/text-limits.ts';
import { tool, ToolError, WORKSPACE_MAX_KEYS, type Tool } from './tool-definition.ts';
import { FILE_TOOLS } from './file-tools.ts';

export { ToolError, WORKSPACE_MAX_KEYS, type Tool, type ToolContext } from './tool-definition.ts';

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
    args: z.strictObject({ key: z.string().min(1).max(MAX_NOTE_KEY_CHARS) }),
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
      key: z.string().min(1).max(MAX_NOTE_KEY_CHARS),
      value: z.string().max(MAX_NOTE_VALUE_CHARS),
      delayMs: z.number().int().min(0).max(600_000).optional().describe('Keeps the call in flight before its write is recorded (to exercise crash repair).'),
    }),
    effect: 'side-effects',
    run: async ({ key, value, delayMs }, ctx) => {
      if (!(await ctx.workspace.hasRoomFor(key)))
        throw new ToolError(`the note store is full (${WORKSPACE_MAX_KEYS} notes): overwrite an existing note instead`);
      ctx.workspace.write(key, value);
      if (delayMs) await abortableSleep(delayMs, ctx.signal);
      return `wrote note "${key}"`;
    },
  }),
  ...FILE_TOOLS,
];

const BY_NAME = new Map(BUILTIN_TOOLS.map((t) => [t.name, t]));
export const toolEffectOf = (name: string): ToolEffect | undefined => BY_NAME.get(name)?.effect;
