// One configured MCP server, as a process's sessions share it: a `Client` and
// its transport (stdio or Streamable HTTP), started on first use, its tool
// list cached until the server says it changed, started again on the next use
// after it went away (a crash, a closed connection).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { ToolListChangedNotificationSchema, type CallToolResult, type Tool as McpToolInfo } from '@modelcontextprotocol/sdk/types.js';
import { isStdioServer, type McpServerConfig } from './mcp-config.ts';
import { sandboxArgs, workspaceEnvironment, type SandboxRunner } from '../workspace-sandbox.ts';

export type { CallToolResult, McpToolInfo };

/** A server lists at most this many tools (pages of tools/list are followed up to it). */
const MAX_TOOLS = 1000;

export class McpServerConnection {
  private client?: Promise<Client>;
  private tools?: Promise<McpToolInfo[]>;
  private closed = false;

  constructor(
    readonly name: string,
    readonly config: McpServerConfig,
    private readonly log: (msg: string, err?: unknown) => void = () => {},
    /** The directory `${workspace}` stands for in a workspace server's args, cwd and env values (mcp-config.ts `workspace`). */
    private readonly workspaceDir?: string,
    /** A workspace server's HOME (and a sandboxed server's): a private empty directory, not forkline's (its dotfiles, credentials). */
    private readonly home?: string,
    /** How a server whose config says `sandbox` is run (decided once per process: tool-catalog.ts). */
    private readonly sandbox?: SandboxRunner,
  ) {}

  /** The server's tools (tools/list, cached until notifications/tools/list_changed or a restart). */
  listTools(): Promise<McpToolInfo[]> {
    const tools = (this.tools ??= this.connected().then(async (client) => {
      const all: McpToolInfo[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listTools(cursor ? { cursor } : undefined);
        all.push(...page.tools);
        cursor = page.nextCursor;
      } while (cursor && all.length < MAX_TOOLS);
      return all.slice(0, MAX_TOOLS);
    }));
    tools.catch(() => {
      if (this.tools === tools) this.tools = undefined; // the next use asks again
    });
    return tools;
  }

  /** tools/call. A server that dies mid-call rejects it; the next call starts the server again. */
  async callTool(
    name: string,
    args: Record<string, unknown>,
    opts: { signal: AbortSignal; timeoutMs: number; onProgress?: (p: { progress: number; total?: number; message?: string }) => void },
  ): Promise<CallToolResult> {
    const client = await this.connected();
    return (await client.callTool({ name, arguments: args }, undefined, {
      signal: opts.signal,
      timeout: opts.timeoutMs,
      maxTotalTimeout: opts.timeoutMs,
      ...(opts.onProgress ? { onprogress: opts.onProgress } : {}),
    })) as CallToolResult;
  }

  async close(): Promise<void> {
    this.closed = true;
    const client = this.client;
    this.client = this.tools = undefined;
    await (await client?.catch(() => undefined))?.close().catch(() => {});
  }

  private connected(): Promise<Client> {
    if (this.closed) return Promise.reject(new Error(`MCP server "${this.name}" is shut down`));
    if (this.client) return this.client;
    const client = new Client({ name: 'forkline', version: '0.1.0' }, { capabilities: {} });
    const started = (async () => {
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        this.tools = undefined;
      });
      client.onclose = () => {
        // Gone (crashed, killed, connection closed): started again on next use.
        if (this.client === started) this.client = this.tools = undefined;
      };
      await client.connect(this.transport());
      return client;
    })();
    this.client = started;
    started.catch((err) => {
      this.log(`MCP server "${this.name}" did not start`, err);
      if (this.client === started) this.client = undefined;
    });
    return started;
  }

  private transport() {
    const c = this.config;
    if (isStdioServer(c)) {
      // The SDK gives a child only HOME, LOGNAME, PATH, SHELL, TERM and USER of
      // our environment, then `env`: none of forkline's secrets (DATABASE_URL, keys, tokens).
      // A workspace server gets the workspace's allow-list on top: HOME is a
      // private directory (not forkline's, with its dotfiles and credentials;
      // not the workspace, where caches such as npx's would become the
      // session's files), git fenced in the workspace.
      const ws = this.workspaceDir;
      const dir = (s: string) => (ws === undefined ? s : s.replaceAll('${workspace}', ws));
      const extra = c.env && Object.fromEntries(Object.entries(c.env).map(([k, v]) => [k, dir(v)]));
      // Sandboxed, a workspace server's HOME is the sandbox's own /tmp: the private HOME is shared by every session's servers.
      const home = c.sandbox && ws !== undefined ? '/tmp' : this.home;
      const env = ws === undefined ? (c.sandbox && home ? { HOME: home, ...c.env } : c.env) : workspaceEnvironment(ws, { path: process.env.PATH, home, extra });
      const args = c.args.map(dir);
      const cwd = c.cwd && dir(c.cwd);
      let transport: StdioClientTransport;
      if (c.sandbox) {
        // Never run without the sandbox the operator asked for: not started, and why (reported in toolServers).
        if (!this.sandbox || 'refused' in this.sandbox) {
          throw new Error(`MCP server "${this.name}" asks for a sandbox, but ${this.sandbox ? this.sandbox.refused : 'none is available'}: not started`);
        }
        const { readOnly = [], network = false } = c.sandbox === true ? {} : c.sandbox;
        // Works in its workspace, else in its private HOME; a cwd outside it is mounted read-only.
        const workDir = ws ?? this.home;
        if (!workDir) throw new Error(`MCP server "${this.name}": a sandboxed server needs a directory to work in`);
        const inside = (p: string) => p === workDir || p.startsWith(`${workDir}/`);
        const extras = { readOnly: [...readOnly, ...(cwd && !inside(cwd) ? [cwd] : [])], network };
        const argv = [c.command, ...args];
        const chdir = cwd && cwd !== workDir ? ['/bin/sh', '-c', 'cd "$0" && exec "$@"', cwd, ...argv] : argv;
        transport = new StdioClientTransport({ command: this.sandbox.bwrap, args: sandboxArgs(workDir, chdir, extras), env, stderr: 'pipe' });
      } else {
        transport = new StdioClientTransport({ command: c.command, args, env, cwd, stderr: 'pipe' });
      }
      transport.stderr?.on('data', (chunk: Buffer) => this.log(`MCP server "${this.name}": ${chunk.toString('utf8').trimEnd().slice(0, 2000)}`));
      return transport;
    }
    return new StreamableHTTPClientTransport(new URL(c.url), { requestInit: { headers: c.headers } });
  }
}
