// The built-in file tools (docs/contract.md#agent-loop): they work in the session's
// file workspace (file-workspace.ts), and only there. What a call that is not
// read-only changed is recorded with its result (session-runner.ts), so a fork
// at any event sees the files of that moment, and a cut before a call's result
// restores the files to before the call (its synthetic result says so).
import { z } from 'zod';
import { textOf } from '../core/file-tree.ts';
import { tool, ToolError, type ToolContext } from './tool-definition.ts';
import type { FileWorkspace } from './file-workspace.ts';

/** read_file answers at most this much text. */
export const READ_FILE_MAX_CHARS = 100_000;
/** list_files names at most this many files. */
export const LIST_FILES_MAX = 1000;

const filePath = z.string().min(1).max(1024).describe('A path relative to the workspace, e.g. "src/main.py".');

function workspaceOf(ctx: ToolContext): FileWorkspace {
  if (!ctx.files) throw new ToolError('this process has no file workspaces');
  return ctx.files;
}

const plural = (n: number, what: string) => `${n} ${what}${n === 1 ? '' : 's'}`;

export const FILE_TOOLS = [
  tool({
    name: 'read_file',
    description: "Reads a text file of the session's file workspace.",
    args: z.strictObject({ path: filePath }),
    effect: 'read-only',
    files: 'only',
    run: async ({ path }, ctx) => {
      const bytes = await workspaceOf(ctx).readFile(path);
      const text = textOf(bytes);
      if (text === undefined) throw new ToolError(`"${path}" is not a text file (${plural(bytes.byteLength, 'byte')})`);
      return text.length > READ_FILE_MAX_CHARS ? `${text.slice(0, READ_FILE_MAX_CHARS)}\n[… ${text.length - READ_FILE_MAX_CHARS} more characters]` : text;
    },
  }),
  tool({
    name: 'write_file',
    description: "Creates or replaces a file of the session's file workspace with `content` (directories are made as needed).",
    args: z.strictObject({ path: filePath, content: z.string() }),
    // Writing the same content again changes nothing more.
    effect: 'idempotent',
    files: 'only',
    run: async ({ path, content }, ctx) => {
      const bytes = Buffer.from(content, 'utf8');
      const { rel, created } = await workspaceOf(ctx).writeFile(path, bytes);
      return `${created ? 'created' : 'wrote'} ${rel} (${plural(bytes.byteLength, 'byte')})`;
    },
  }),
  tool({
    name: 'edit_file',
    description: 'Replaces the one occurrence of `oldText` in a text file by `newText` (an error when it occurs no time or several times).',
    args: z.strictObject({ path: filePath, oldText: z.string().min(1), newText: z.string() }),
    effect: 'side-effects',
    files: 'only',
    run: async ({ path, oldText, newText }, ctx) => {
      const ws = workspaceOf(ctx);
      const text = textOf(await ws.readFile(path));
      if (text === undefined) throw new ToolError(`"${path}" is not a text file`);
      const at = text.indexOf(oldText);
      if (at < 0) throw new ToolError(`"${path}" does not contain oldText`);
      if (text.indexOf(oldText, at + 1) >= 0) throw new ToolError(`oldText occurs more than once in "${path}": give more of the surrounding text`);
      const { rel } = await ws.writeFile(path, Buffer.from(text.slice(0, at) + newText + text.slice(at + oldText.length), 'utf8'));
      return `edited ${rel}`;
    },
  }),
  tool({
    name: 'delete_file',
    description: "Deletes a file of the session's file workspace.",
    args: z.strictObject({ path: filePath }),
    effect: 'idempotent',
    files: 'only',
    run: async ({ path }, ctx) => `deleted ${await workspaceOf(ctx).deleteFile(path)}`,
  }),
  tool({
    name: 'list_files',
    description: "Lists the files of the session's file workspace under a directory (default: all), with their sizes.",
    args: z.strictObject({ path: z.string().max(1024).optional().describe('A directory relative to the workspace; default: the whole workspace.') }),
    effect: 'read-only',
    files: 'only',
    run: async ({ path }, ctx) => {
      const files = await workspaceOf(ctx).list(path ?? '.');
      if (files.length === 0) return 'no files';
      const shown = files.slice(0, LIST_FILES_MAX).map((f) => `${f.path} (${plural(f.size, 'byte')})`);
      if (files.length > LIST_FILES_MAX) shown.push(`[… ${files.length - LIST_FILES_MAX} more files]`);
      return shown.join('\n');
    },
  }),
];
