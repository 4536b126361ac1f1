// MCP tools as the agent's tools: offered to the model as `<server>__<tool>`,
// their effect from annotations as the operator's config allows (docs/contract.md#agent-loop),
// their arguments checked against the tool's input schema before the call,
// their results screened at the door (mcp-result.ts) and turned into text for
// the model (the screened result is kept in the log beside it,
// `plugin/mcp/result`, for clients).
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import { withoutSecrets } from '../../core/secrets.ts';
import { effectFromAnnotations, type FileScope } from '../../core/tools.ts';
import { ToolError, type Tool } from '../tools.ts';
import type { FileWorkspace } from '../file-workspace.ts';
import type { CallToolResult, McpServerConnection, McpToolInfo } from './mcp-server.ts';
import { MCP_NAME_SEPARATOR } from './mcp-config.ts';
import { resultText, screenResult } from './mcp-result.ts';
import type { ValueCheck } from './schema-checks.ts';

/** The event that keeps a call's whole MCP result (text, structured content, images, links). */
export const MCP_RESULT = 'plugin/mcp/result';
/** A server's error message, or a progress message, as far as it is read (the rest is cut). */
const MAX_MESSAGE_CHARS = 2000;
/** A call's progress is passed on at most this often (a server may send thousands a second). */
const PROGRESS_INTERVAL_MS = 100;

const cut = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…` : s);

/** A value checked against one of the tool's schemas by the schema worker; a check that could not be done is the call's error. */
async function checked(check: ValueCheck, value: unknown, name: string): Promise<{ valid: true } | { valid: false; errorMessage: string }> {
  try {
    return await check(value);
  } catch (err) {
    throw new ToolError(`${name}: not checked against its schema: ${(err as Error).message}`);
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
    /** Its input schema's check, and its output schema's if it has one (schema-checks.ts: the catalog compiled them). */
    checks: { input: ValueCheck; output?: ValueCheck };
  },
): Tool {
  const name = `${server.name}${MCP_NAME_SEPARATOR}${info.name}`;
  const effect = effectFromAnnotations(info.annotations, { trusted: opts.trusted, override: opts.effect });
  const { input: validate, output: validateOutput } = opts.checks;
  return {
    name,
    description: info.description ?? info.title ?? info.name,
    parameters: info.inputSchema as Record<string, unknown>,
    effect,
    server: server.name,
    ...(opts.workspace ? { files: opts.workspace.files } : {}),
    ...(opts.approval ? { approval: true } : {}),
    async run(args, ctx) {
      // Checked in the schema worker: the event loop goes on meanwhile (the call is already in the log).
      const argsChecked = await checked(validate, args, name);
      if (!argsChecked.valid) throw new ToolError(`invalid arguments for ${name}: ${argsChecked.errorMessage}`);
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
        const outputChecked = await checked(validateOutput, result.structuredContent, name);
        if (!outputChecked.valid)
          throw new ToolError(`${name}: structured content does not match its output schema: ${cut(outputChecked.errorMessage, MAX_MESSAGE_CHARS)}`);
      }
      return text;
    },
  };
}
