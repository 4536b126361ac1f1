// One configured MCP server, as a process's sessions share it: a `Client` and
// its transport (stdio or Streamable HTTP), started on first use, its tool
// list cached until the server says it changed, started again on the next use
// after it went away (a crash, a closed connection).
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import {
  ErrorCode,
  isJSONRPCErrorResponse,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  McpError,
  ToolListChangedNotificationSchema,
  type CallToolResult,
  type JSONRPCMessage,
  type Tool as McpToolInfo,
} from '@modelcontextprotocol/sdk/types.js';
import { headerSecrets } from '../../core/secrets.ts';
import { isStdioServer, type McpServerConfig } from './mcp-config.ts';
import { boundedFetch } from './mcp-http.ts';
import { BoundedStdioTransport } from './mcp-stdio.ts';
import { ToolListPageSchema, ToolListScreen } from './mcp-tool-list.ts';
import { sandboxArgs, workspaceEnvironment, type SandboxRunner } from '../workspace-sandbox.ts';
import { fileSizeCapped, type WatchedWhen } from '../disk-watch.ts';
import { ToolError } from '../tool-error.ts';

export type { CallToolResult, McpToolInfo };
type Transport = Parameters<Client['connect']>[0];
type TransportSendOptions = Parameters<Transport['send']>[1];

/** Pages of tools/list followed at most (a server may answer every page with another cursor). */
const MAX_LIST_PAGES = 100;
/** tools/list is asked again at most this often, however many `tools/list_changed` a server sends. */
const MIN_RELIST_INTERVAL_MS = 1000;
/**
 * Answers to a server's own requests (ping; anything else is "Method not found") waiting to be
 * sent: past it, its requests go unanswered, so a server that floods requests and never reads
 * the answers makes this process hold at most this many.
 */
const MAX_PENDING_ANSWERS = 16;
/**
 * A server's requests answered in a second, at most: past it they go unanswered (over Streamable HTTP each
 * answer is an HTTP request of its own, so a flood of pings answered as fast as they came cost a CPU).
 */
const MAX_ANSWERS_PER_S = 10;

/** An error as the log shows it: a server's words (an HTTP error body, a JSON-RPC message) cut to a line's worth. */
export function loggedError(err: unknown): unknown {
  const message = err instanceof Error ? err.message : String(err);
  return message.length > 2000 ? new Error(`${message.slice(0, 2000)}…`) : err;
}

/**
 * What a server working in a directory of forkline's (a session's workspace, or where it lists its tools) is held to,
 * as a shell command is (disk-watch.ts): no file it writes grows past `maxFileBytes`, and what the directory holds is
 * watched for as long as its process lives, between its calls too (a timer of its own writes after a call returned).
 */
export interface ServerLimits {
  maxFileBytes: number;
  /** Starts watching its directory: `over` is called once, with why, past the quota; the answer stops watching. */
  watch: (over: (why: string) => void, when: WatchedWhen) => Promise<() => void>;
  /** Its process was stopped past the quota while no call of it ran: what it wrote since is undone, and someone told. */
  stoppedBetweenCalls: (why: string) => void;
}

export class McpServerConnection {
  private client?: Promise<Client>;
  private tools?: Promise<McpToolInfo[]>;
  /** When the cached tools were asked for, and whether the server has said they changed since. */
  private listedAt = 0;
  private stale = false;
  private closed = false;
  /** The stdio transport of the process running now, if it is one (stop kills it). */
  private stdio?: BoundedStdioTransport;
  /** What the config has it send (its headers' values): never in what its errors say (core/secrets.ts). */
  readonly secrets: readonly string[];
  /** Its calls running now (a stop past the quota is the call's error, or between calls someone else's to tell). */
  private calls = 0;
  /** Why its process running now was stopped past its quota (its calls fail with it). */
  private stoppedFor?: string;

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
    /** How long initialize, and tools/list with all its pages, may take (the config's `timeoutMs`, else the agent's tool timeout). */
    private readonly requestTimeoutMs = 30_000,
    /** A server working in a directory of forkline's: its per-file cap, and its directory watched while it lives. */
    private readonly limits?: ServerLimits,
  ) {
    this.secrets = isStdioServer(config) ? [] : Object.values(config.headers).flatMap(headerSecrets);
  }

  /**
   * The server's tools (tools/list, cached until notifications/tools/list_changed or a restart),
   * screened: what the model is offered is bounded and valid for providers (mcp-tool-list.ts).
   */
  listTools(): Promise<McpToolInfo[]> {
    if (this.stale && Date.now() - this.listedAt >= MIN_RELIST_INTERVAL_MS) this.tools = undefined;
    const tools = (this.tools ??= this.connected().then(async (client) => {
      this.stale = false;
      this.listedAt = Date.now();
      const screen = new ToolListScreen(this.name, this.log);
      // The whole listing, every page of it, is held to the request timeout: a server answering each page just inside it,
      // each naming another, would otherwise hold every turn that offers its tools for MAX_LIST_PAGES timeouts.
      const deadline = Date.now() + this.requestTimeoutMs;
      let cursor: string | undefined;
      for (let pages = 0; pages < MAX_LIST_PAGES && !screen.full; pages++) {
        const tooLong = new Error(`tools/list did not end within ${this.requestTimeoutMs} ms (${pages} pages read): not listed`);
        const left = deadline - Date.now();
        if (left <= 0) throw tooLong;
        // Not client.listTools: it compiles every output schema before they are screened (mcpTool checks structured
        // content), and checks the whole page in one stretch; the screen checks each tool it reads (mcp-tool-list.ts).
        const page = await client
          .request({ method: 'tools/list', params: cursor ? { cursor } : {} }, ToolListPageSchema, { timeout: left })
          .catch((err: unknown) => {
            // A page's timeout is what was left of the listing's.
            throw err instanceof McpError && err.code === ErrorCode.RequestTimeout ? tooLong : err;
          });
        await screen.add(page.tools);
        cursor = page.nextCursor;
        if (!cursor) break;
      }
      return screen.tools;
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
    this.calls++;
    try {
      return (await client.callTool({ name, arguments: args }, undefined, {
        signal: opts.signal,
        timeout: opts.timeoutMs,
        maxTotalTimeout: opts.timeoutMs,
        ...(opts.onProgress ? { onprogress: opts.onProgress } : {}),
      })) as CallToolResult;
    } catch (err) {
      // Stopped past its quota while the call ran: that is the call's error, in forkline's words.
      throw this.stoppedFor ? new ToolError(this.stoppedFor) : err;
    } finally {
      this.calls--;
    }
  }

  /**
   * Kills the server's process now, with what it started (a workspace server past its quota);
   * its open calls fail with `why`, and the next use starts it again.
   */
  stop(why: string): void {
    this.stdio?.kill(why);
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
    // No capabilities: an agent runs unattended, so sampling, elicitation and roots requests are "Method not found".
    const client = new Client({ name: 'forkline', version: '0.1.0' }, { capabilities: {} });
    const started = (async () => {
      client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
        this.stale = true; // asked again on next use, at most once a second (a storm of these is one re-list)
      });
      const transport = new AnswerBoundTransport(this.transport(), this.name, this.log);
      this.stoppedFor = undefined;
      const unwatch = await this.watch();
      client.onclose = () => {
        unwatch();
        // Gone (crashed, killed, connection closed): started again on next use.
        if (this.client === started) this.client = this.tools = undefined;
      };
      try {
        await client.connect(transport, { timeout: this.requestTimeoutMs });
      } catch (err) {
        unwatch();
        throw err;
      }
      return client;
    })();
    this.client = started;
    started.catch((err) => {
      this.log(`MCP server "${this.name}" did not start`, loggedError(err));
      if (this.client === started) this.client = undefined;
    });
    return started;
  }

  /**
   * Watches its directory for as long as its process lives (ServerLimits): past the quota the process is stopped,
   * during a call (the call's error says why) or between calls (`stoppedBetweenCalls` is told).
   */
  private async watch(): Promise<() => void> {
    const limits = this.limits;
    if (!limits) return () => {};
    return limits.watch(
      (why) => {
        const betweenCalls = this.calls === 0;
        this.stoppedFor = `stopped: ${why}`;
        this.stop(this.stoppedFor);
        if (betweenCalls) limits.stoppedBetweenCalls(why);
      },
      () => (this.calls > 0 ? 'while it ran' : 'between its calls'),
    );
  }

  private transport() {
    const c = this.config;
    if (isStdioServer(c)) {
      // A child gets only HOME, LOGNAME, PATH, SHELL, TERM and USER of our
      // environment (the SDK's default, mcp-stdio.ts), then `env`: none of
      // forkline's secrets (DATABASE_URL, keys, tokens).
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
      // Its messages, stderr and process group bounded (mcp-stdio.ts).
      const bounded = { name: this.name, log: this.log, env };
      // A workspace server's files are held to the per-file cap as it writes them, as a shell command's (disk-watch.ts).
      const capped = (argv: string[]) => (this.limits ? fileSizeCapped(argv, this.limits.maxFileBytes) : argv);
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
        return (this.stdio = new BoundedStdioTransport({
          ...bounded,
          command: this.sandbox.bwrap,
          args: sandboxArgs(workDir, capped(chdir), { ...extras, tmpBytes: this.sandbox.tmpBytes }),
        }));
      }
      const [command, ...rest] = capped([c.command, ...args]);
      return (this.stdio = new BoundedStdioTransport({ ...bounded, command: command!, args: rest, cwd }));
    }
    // Bytes and time of every answer bounded as a stdio message's are (mcp-http.ts); a cancelled call's HTTP request is aborted.
    return new StreamableHTTPClientTransport(new URL(c.url), {
      requestInit: { headers: c.headers },
      fetch: boundedFetch({ deadlineMs: this.requestTimeoutMs + 1000 }),
    });
  }
}

/**
 * A transport that leaves a server's requests unanswered while MAX_PENDING_ANSWERS answers wait to be sent,
 * or past MAX_ANSWERS_PER_S in a second (logged at most once a minute).
 */
class AnswerBoundTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport['onmessage'];
  private pending = 0;
  private windowStart = 0;
  private answersInWindow = 0;
  private loggedAt = -Infinity;

  constructor(
    private readonly inner: Transport,
    private readonly name: string,
    private readonly log: (msg: string) => void,
  ) {}

  get sessionId() {
    return this.inner.sessionId;
  }

  setProtocolVersion(version: string) {
    this.inner.setProtocolVersion?.(version);
  }

  start(): Promise<void> {
    this.inner.onclose = () => this.onclose?.();
    this.inner.onerror = (error) => this.onerror?.(error);
    this.inner.onmessage = (message, extra) => {
      if (isJSONRPCRequest(message) && !this.answers()) return;
      this.onmessage?.(message, extra);
    };
    return this.inner.start();
  }

  /** Whether a request of the server's is answered now. */
  private answers(): boolean {
    const now = Date.now();
    if (now - this.windowStart >= 1000) [this.windowStart, this.answersInWindow] = [now, 0];
    if (this.pending < MAX_PENDING_ANSWERS && this.answersInWindow < MAX_ANSWERS_PER_S) {
      this.answersInWindow++;
      return true;
    }
    if (now - this.loggedAt >= 60_000) {
      this.loggedAt = now;
      this.log(
        `MCP server "${this.name}" sends more requests than are answered (${MAX_ANSWERS_PER_S} a second, ${MAX_PENDING_ANSWERS} waiting): the rest go unanswered`,
      );
    }
    return false;
  }

  async send(message: JSONRPCMessage, options?: TransportSendOptions): Promise<void> {
    if (!isJSONRPCResultResponse(message) && !isJSONRPCErrorResponse(message)) return this.inner.send(message, options);
    this.pending++;
    try {
      await this.inner.send(message, options);
    } finally {
      this.pending--;
    }
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
