// MCP tools as the agent's tools: offered to the model as `<server>__<tool>`,
// their effect from annotations as the operator's config allows (docs/contract.md#agent-loop),
// their arguments checked against the tool's input schema before the call,
// their results turned into text for the model (the whole MCP result is kept
// in the log beside it, `plugin/mcp/result`, for clients).
import { AjvJsonSchemaValidator } from '@modelcontextprotocol/sdk/validation/ajv';
import { effectFromAnnotations, type FileScope } from '../../core/tools.ts';
import { ToolError, type Tool } from '../tools.ts';
import type { CallToolResult, McpServerConnection, McpToolInfo } from './mcp-server.ts';
import { MCP_NAME_SEPARATOR } from './mcp-config.ts';

/** The event that keeps a call's whole MCP result (text, structured content, images, links). */
export const MCP_RESULT = 'plugin/mcp/result';
/** A result kept whole up to this size (JSON); a larger one is kept as its text. */
const MAX_KEPT_RESULT_CHARS = 1_000_000;
/** What the model reads of one result at most (about 25,000 tokens, as other MCP hosts cut): the rest is cut with a note saying so. */
export const MAX_RESULT_TEXT_CHARS = 100_000;
/** A server's error message, or a progress message, as far as it is read (the rest is cut). */
const MAX_MESSAGE_CHARS = 2000;
/** A call's progress is passed on at most this often (a server may send thousands a second). */
const PROGRESS_INTERVAL_MS = 100;

const cut = (s: string, max: number) => (s.length > max ? `${s.slice(0, max)}…` : s);

/** A result's text as the model reads it: at most MAX_RESULT_TEXT_CHARS, a cut said so. */
function modelText(text: string): string {
  if (text.length <= MAX_RESULT_TEXT_CHARS) return text;
  return `${text.slice(0, MAX_RESULT_TEXT_CHARS)}\n[cut: the result was ${text.length.toLocaleString('en-US')} characters; the first ${MAX_RESULT_TEXT_CHARS.toLocaleString('en-US')} are shown]`;
}

const validators = new AjvJsonSchemaValidator();

/** What the model reads of an MCP result: its text, and a line for each other part. */
export function mcpResultText(result: CallToolResult): string {
  const parts: string[] = [];
  for (const c of result.content ?? []) {
    switch (c.type) {
      case 'text':
        parts.push(c.text);
        break;
      case 'image':
      case 'audio':
        parts.push(`[${c.type}: ${c.mimeType}, ${Math.floor((c.data.length * 3) / 4)} bytes]`);
        break;
      case 'resource_link':
        parts.push(`[resource link: ${c.uri}${c.name ? ` (${c.name})` : ''}]`);
        break;
      case 'resource':
        parts.push('text' in c.resource ? String(c.resource.text) : `[resource: ${c.resource.uri}${c.resource.mimeType ? `, ${c.resource.mimeType}` : ''}]`);
        break;
    }
  }
  if (parts.length === 0 && result.structuredContent) parts.push(JSON.stringify(result.structuredContent));
  return parts.join('\n');
}

/** The result as the log keeps it: whole, or (too large) without its binary parts. */
function keptResult(result: CallToolResult): unknown {
  const whole = JSON.stringify(result);
  if (whole.length <= MAX_KEPT_RESULT_CHARS) return JSON.parse(whole);
  return { truncated: true, isError: result.isError ?? false, text: mcpResultText(result).slice(0, MAX_KEPT_RESULT_CHARS) };
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
    /** A workspace server (mcp-config.ts `workspace`): each call goes to the session's own instance, started in its directory. */
    workspace?: { files: FileScope; connectionFor: (sessionId: string, dir: string) => McpServerConnection };
  },
): Tool {
  const name = `${server.name}${MCP_NAME_SEPARATOR}${info.name}`;
  const effect = effectFromAnnotations(info.annotations, { trusted: opts.trusted, override: opts.effect });
  // Throws for a schema Ajv cannot compile: the catalog leaves that tool out (its size and depth are bounded: mcp-tool-list.ts).
  const validate = validators.getValidator(info.inputSchema as never);
  const validateOutput = info.outputSchema && validators.getValidator(info.outputSchema as never);
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
        connection = opts.workspace.connectionFor(ctx.sessionId, await ctx.files.ready());
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
        // A server's error message is its text: bounded as a result's is, not megabytes in the log and the next request.
        throw new ToolError(`tool failed: ${cut((err as Error).message ?? String(err), MAX_MESSAGE_CHARS)}`);
      }
      ctx.record?.({ type: MCP_RESULT, data: { server: server.name, tool: info.name, result: keptResult(result) } });
      const text = modelText(mcpResultText(result));
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
