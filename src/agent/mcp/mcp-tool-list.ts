// What a server's tools/list may put in a model request (docs/mcp.md "Names,
// arguments, results"): a server's answer is attacker-influenced, and every
// tool it lists is sent to the model on every step. A tool is offered only
// when its name is 1 to 128 characters the log can hold, no control or format
// character (a bidirectional override) among them, and not listed twice (a request sends it under its wire name:
// core/wire-names.ts), and its schemas are JSON Schemas of bounded size and
// depth; its description is cut. The server's
// tools together are bounded too. What is left out is logged, not an error:
// the server's other tools are offered. A page is screened a tool at a time,
// and no more of it than could be offered (the SDK's own schema checked a
// page whole, in the stretch of the event loop that parsed it).
import { setImmediate as letGo } from 'node:timers/promises';
import { z } from 'zod';
import { ToolSchema, type Tool as McpToolInfo } from '@modelcontextprotocol/sdk/types.js';
import { isStorableText } from '../../core/storable.ts';
import { toolSchemaProblem } from '../../core/tools.ts';

/** A tool's name as a server may give it (the MCP specification's 1 to 128 characters): `<server>__<tool>` then fits the log's 200. */
const MAX_TOOL_NAME_CHARS = 128;
/** A server offers at most this many tools (pages of tools/list are followed up to it). */
const MAX_TOOLS = 1000;
/** A tool's description as the model reads it (longer ones are cut). */
const MAX_TOOL_DESCRIPTION_CHARS = 4096;
/** A server's tools together (names, descriptions, input and output schemas as JSON): past it, the rest are left out. */
const MAX_SERVER_TOOLS_CHARS = 262_144;
/** Tools of one page looked at, at most: the rest are left out unread. */
const MAX_PAGE_TOOLS = MAX_TOOLS;
/** Tools screened in one turn of the event loop. */
const TOOLS_PER_TURN = 50;

/** A tools/list answer as it is read: its tools are checked one by one as they are screened (`ToolListScreen.add`). */
export const ToolListPageSchema = z.looseObject({ tools: z.array(z.unknown()), nextCursor: z.string().optional() });

/** A name from a server, as a log line shows it: short, one line. */
const shown = (name: string) => JSON.stringify(name.length > 80 ? `${name.slice(0, 80)}…` : name);

/** Screens a server's tools/list pages as they arrive: only what may be offered is kept (not the megabytes of the rest). */
export class ToolListScreen {
  readonly tools: McpToolInfo[] = [];
  private readonly names = new Set<string>();
  private chars = 0;
  private leftOut = 0;

  constructor(
    private readonly server: string,
    private readonly log: (msg: string) => void,
  ) {}

  /** Whether no more tools will be kept. */
  get full(): boolean {
    return this.tools.length >= MAX_TOOLS || this.chars >= MAX_SERVER_TOOLS_CHARS;
  }

  /** Screens one page's tools, the event loop let go every TOOLS_PER_TURN of them. */
  async add(page: readonly unknown[]): Promise<void> {
    if (page.length > MAX_PAGE_TOOLS)
      this.log(`MCP server "${this.server}": one page of its tools/list lists ${page.length} tools: only the first ${MAX_PAGE_TOOLS} are read`);
    for (let i = 0; i < Math.min(page.length, MAX_PAGE_TOOLS); i++) {
      if (i > 0 && i % TOOLS_PER_TURN === 0) await letGo();
      const parsed = ToolSchema.safeParse(page[i]);
      if (!parsed.success) {
        const name = (page[i] as { name?: unknown } | null)?.name;
        this.leave(typeof name === 'string' ? shown(name) : `#${i}`, `it is not a tool (${parsed.error.issues[0]?.message ?? 'invalid'})`);
        continue;
      }
      const info = parsed.data;
      const problem = this.problem(info);
      if (problem) {
        this.leave(shown(info.name), problem);
        continue;
      }
      const description = info.description ?? info.title ?? info.name;
      const cut = description.length > MAX_TOOL_DESCRIPTION_CHARS ? `${description.slice(0, MAX_TOOL_DESCRIPTION_CHARS - 1)}…` : description;
      this.names.add(info.name);
      // Its output schema too: not sent to the model, but held and compiled like the input's. Before, uncounted, 1,000
      // tools could bring 64 KiB of output schema each (64 MB over pages), each compiled (100 of them: 97 MB of heap).
      this.chars +=
        info.name.length + cut.length + JSON.stringify(info.inputSchema).length + (info.outputSchema ? JSON.stringify(info.outputSchema).length : 0);
      // Only what is used: a server's other fields (_meta, icons, …) are not kept.
      const { readOnlyHint, idempotentHint, destructiveHint, openWorldHint } = info.annotations ?? {};
      this.tools.push({
        name: info.name,
        description: cut,
        inputSchema: info.inputSchema,
        ...(info.outputSchema ? { outputSchema: info.outputSchema } : {}),
        ...(info.annotations ? { annotations: { readOnlyHint, idempotentHint, destructiveHint, openWorldHint } } : {}),
      });
    }
  }

  /** Logs a tool left out: the first few; a server listing thousands of bad tools is one line more. */
  private leave(tool: string, why: string): void {
    if (++this.leftOut <= 10) this.log(`MCP server "${this.server}": tool ${tool} is not offered: ${why}`);
    else if (this.leftOut === 11) this.log(`MCP server "${this.server}": more tools are not offered`);
  }

  private problem(info: McpToolInfo): string | undefined {
    if (this.full) return `the server lists more than ${MAX_TOOLS} tools or ${MAX_SERVER_TOOLS_CHARS} characters of them`;
    if (info.name.length === 0 || info.name.length > MAX_TOOL_NAME_CHARS) return `its name must be 1 to ${MAX_TOOL_NAME_CHARS} characters`;
    if (!isStorableText(info.name) || /[\p{Cc}\p{Cf}]/u.test(info.name)) return 'its name holds a control or format character, or an unpaired surrogate';
    if (this.names.has(info.name)) return 'the server lists it twice';
    const input = toolSchemaProblem(info.inputSchema);
    if (input) return `input: ${input}`;
    const output = info.outputSchema === undefined ? undefined : toolSchemaProblem(info.outputSchema);
    if (output) return `output: ${output}`;
    return undefined;
  }
}
