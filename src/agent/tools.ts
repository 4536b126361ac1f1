// Built-in tools and their declared effects (DESIGN §6).
import type { ToolEffect } from '../core/tools.ts';

export const BUILTIN_TOOL_EFFECTS: Record<string, ToolEffect> = {
  clock: 'read-only',
  sleep: 'read-only',
  note_read: 'idempotent',
  note_write: 'side-effects',
};

export const toolEffectOf = (name: string): ToolEffect | undefined => BUILTIN_TOOL_EFFECTS[name];
