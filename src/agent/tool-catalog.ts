// The tools a session's agent may be offered: the built-ins (tools.ts) and the
// tools of the MCP servers declared in FORKLINE_MCP_CONFIG (mcp/), shared by
// the sessions of a process and limited per tenant by the config.
import { withoutSecrets } from '../core/secrets.ts';
import type { ToolEffect } from '../core/tools.ts';
import { BUILTIN_TOOLS, ToolError, type Tool } from './tools.ts';
import { watchWorkspace } from './disk-watch.ts';
import type { FileWorkspace } from './file-workspace.ts';
import { DEFAULT_WORKSPACE_LIMITS, type WorkspaceLimits } from '../core/file-tree.ts';
import { SHELL_TOOL_NAME, shellTool, type ShellRunner } from './shell-tool.ts';
import { findBubblewrap, sandboxProblem, sandboxRunner, type SandboxRunner, type ShellMode } from './workspace-sandbox.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isStdioServer, MCP_NAME_SEPARATOR, type McpConfig } from './mcp/mcp-config.ts';
import { loggedError, McpServerConnection, type McpToolInfo, type ServerLimits } from './mcp/mcp-server.ts';
import { mcpTool } from './mcp/mcp-tools.ts';
import { COMPILE_BUDGET, NotCompiledNow, SchemaChecks } from './mcp/schema-checks.ts';
import { LRUCache } from 'lru-cache';

/** Workspace servers' instances a process keeps running at once (one per session that used one lately). */
const MAX_SESSION_SERVERS = 16;
/**
 * Why instances were stopped between calls, kept until their session's next call says so (an instance closed past
 * MAX_SESSION_SERVERS meanwhile too): this many at most, the oldest forgotten past it (and the log says so).
 */
const MAX_STOPPED_REASONS = 1000;
/** A workspace server stopped past the quota while it lists its tools is not started again for this long (FAILED meanwhile). */
const LISTING_RETRY_MS = 60_000;

export interface CatalogScope {
  tenant: string;
}

/** An MCP server as the catalog last found it: `READY` (its tools listed), `FAILED` (it did not start or answer tools/list: why), `NOT_STARTED` (not asked yet). */
export interface ToolServerStatus {
  name: string;
  status: 'READY' | 'FAILED' | 'NOT_STARTED';
  error?: string;
  toolCount: number;
}

/** How the shell will run, said once at start-up: sandboxed, refused (and why), or unsandboxed because the operator said so. */
function shellRunner(mode: 'on' | 'unsandboxed', bwrap: string | undefined, tmpBytes: number | undefined, log: (msg: string) => void): ShellRunner {
  if (mode === 'unsandboxed') {
    log(
      'FORKLINE_SHELL=unsandboxed: shell commands run as this OS user with no sandbox (they can read any file this user can, and reach the network; docs/operations.md "Threat model")',
    );
    return { unsandboxed: true };
  }
  const problem = sandboxProblem(bwrap);
  if (!problem) return { bwrap: bwrap!, tmpBytes };
  log(
    `FORKLINE_SHELL=on but ${problem}: every shell call is refused. Install bubblewrap (apt-get install bubblewrap), or set FORKLINE_SHELL=unsandboxed to run commands without a sandbox (docs/operations.md "Threat model")`,
  );
  return { refused: problem };
}

/** Every built-in's name, `shell` included whether or not this process offers it: what FORKLINE_APPROVAL_TOOLS may list. */
export const BUILTIN_TOOL_NAMES: readonly string[] = [...BUILTIN_TOOLS.map((t) => t.name), SHELL_TOOL_NAME];

/** Why a list of built-ins whose calls need approval is refused (a name no built-in has), or undefined. */
export function approvalToolsProblem(names: readonly string[]): string | undefined {
  const unknown = names.filter((n) => !BUILTIN_TOOL_NAMES.includes(n));
  if (unknown.length === 0) return undefined;
  return `${unknown.map((n) => `"${n}"`).join(', ')} ${unknown.length === 1 ? 'is not a built-in tool' : 'are not built-in tools'} (built-ins: ${BUILTIN_TOOL_NAMES.join(', ')}; an MCP server's tools are marked in FORKLINE_MCP_CONFIG)`;
}

export class ToolCatalog {
  private readonly servers = new Map<string, { connection: McpServerConnection; config: McpConfig['mcpServers'][string] }>();
  private readonly builtins: Map<string, Tool>;
  /** The tools made of each tools/list answer; `retryAt`: some were not, their server's compile budget spent (made again then). */
  private readonly made = new WeakMap<object, Promise<{ tools: Tool[]; retryAt?: number }>>();
  /** The servers' compiled schemas, by content (a list asked again compiles only what is new in it), in the schema worker. */
  readonly schemaChecks: SchemaChecks;
  /** Workspace servers' instances, one per session that called them lately (the oldest closed past the bound). */
  private readonly perSession = new Map<string, McpServerConnection>();
  /** Which making of its session's directory each workspace server instance was started in. */
  private readonly madeFor = new WeakMap<McpServerConnection, number>();
  /**
   * Why a session's instance (by its key in `perSession`) was stopped between its calls: its next call says so, also
   * when the instance was closed meanwhile (more than MAX_SESSION_SERVERS running): before, the reason went with it and
   * the next call silently started a fresh server, neither the model nor the log learning that its writes were undone.
   */
  private readonly stoppedBetweenCalls = new LRUCache<string, string>({
    max: MAX_STOPPED_REASONS,
    dispose: (why, key, reason) => {
      if (reason !== 'evict') return;
      const [name, sessionId] = key.split('\n');
      this.log(
        `MCP server "${name}" of session ${sessionId}: that it was stopped between its calls (${why}) is forgotten: only the last ${MAX_STOPPED_REASONS} such are kept`,
      );
    },
  });
  /** Where workspace servers are started to list their tools: an empty directory of each server's own (no session's). */
  private listingDir?: string;
  /** A workspace server's instance that lists its tools, stopped past the quota in its directory: why, and when. */
  private readonly listingStopped = new Map<string, { why: string; at: number }>();
  /** The sessions' workspace limits, which a workspace server's listing instance is held to as well. */
  private readonly workspaceLimits: WorkspaceLimits;
  /** Why each server's last tools/list failed (removed once one succeeds): what `serverStatuses` and a turn's log report. */
  private readonly failures = new Map<string, string>();
  /** How many tools each server's last successful tools/list gave. */
  private readonly listed = new Map<string, number>();
  /** The HOME of this process's workspace servers (workspace-sandbox.ts): private, made on first use. */
  private homeDir?: string;
  /** How servers whose config says `sandbox` run here (probed once, when one does). */
  private readonly sandbox?: SandboxRunner;
  /** The agent's tool timeout: how long a server without its own `timeoutMs` may take to start and list its tools. */
  private readonly toolTimeoutMs: number;

  constructor(
    mcp: McpConfig | undefined,
    private readonly log: (msg: string, err?: unknown) => void = () => {},
    /**
     * The opt-in `shell` built-in (FORKLINE_SHELL; shell-tool.ts) and the bubblewrap binary it runs in (default: `bwrap` on PATH);
     * what each of a sandbox's /tmp and /dev/shm may hold (FORKLINE_SANDBOX_TMP_BYTES; workspace-sandbox.ts);
     * the built-ins whose calls need approval in every session (FORKLINE_APPROVAL_TOOLS, docs/contract.md#tool-approval).
     */
    opts: {
      shell?: ShellMode;
      bwrap?: string;
      sandboxTmpBytes?: number;
      approvalTools?: readonly string[];
      toolTimeoutMs?: number;
      workspaceLimits?: WorkspaceLimits;
      /** The time each server's schemas may take the schema worker to compile in a window (schema-checks.ts COMPILE_BUDGET). */
      compileBudget?: typeof COMPILE_BUDGET;
      /** The longest one compile or check may take the schema worker (schema-checks.ts SCHEMA_TIME_BOUND_MS). */
      schemaTimeBoundMs?: number;
    } = {},
  ) {
    this.schemaChecks = new SchemaChecks({ budget: opts.compileBudget, timeBoundMs: opts.schemaTimeBoundMs }, log);
    this.toolTimeoutMs = opts.toolTimeoutMs ?? 30_000;
    this.workspaceLimits = opts.workspaceLimits ?? DEFAULT_WORKSPACE_LIMITS;
    const problem = approvalToolsProblem(opts.approvalTools ?? []);
    if (problem) throw new Error(`FORKLINE_APPROVAL_TOOLS: ${problem}`);
    this.builtins = new Map(BUILTIN_TOOLS.map((t) => [t.name, t]));
    if (opts.shell && opts.shell !== 'off')
      this.builtins.set(SHELL_TOOL_NAME, shellTool(shellRunner(opts.shell, opts.bwrap ?? findBubblewrap(), opts.sandboxTmpBytes, log)));
    // Marked as an MCP server's tools are by their config: the agent asks before each call runs.
    for (const name of opts.approvalTools ?? []) {
      const builtin = this.builtins.get(name);
      if (builtin) this.builtins.set(name, { ...builtin, approval: true });
    }
    const sandboxed = Object.entries(mcp?.mcpServers ?? {}).filter(([, c]) => isStdioServer(c) && c.sandbox);
    if (sandboxed.length > 0) {
      this.sandbox = sandboxRunner(opts.bwrap ?? findBubblewrap(), opts.sandboxTmpBytes);
      if ('refused' in this.sandbox) {
        log(
          `MCP servers ${sandboxed.map(([n]) => `"${n}"`).join(', ')} ask for a sandbox, but ${this.sandbox.refused}: they are not started (install bubblewrap: apt-get install bubblewrap)`,
        );
      }
    }
    for (const [name, config] of Object.entries(mcp?.mcpServers ?? {})) {
      const listing = isStdioServer(config) && config.workspace ? this.listingDirOf(name) : undefined;
      const home = listing || (isStdioServer(config) && config.sandbox) ? this.mcpHome() : undefined;
      const timeout = config.timeoutMs ?? this.toolTimeoutMs;
      this.servers.set(name, {
        connection: new McpServerConnection(name, config, log, listing, home, this.sandbox, timeout, listing ? this.listingLimits(name, listing) : undefined),
        config,
      });
    }
  }

  /** Whether some server is limited to tenants (only then must a runner know its session's). */
  get tenantScoped(): boolean {
    return [...this.servers.values()].some((s) => s.config.tenants);
  }

  /**
   * The tool set of a session whose log names none: the built-ins and the
   * servers the operator marks `"default": true` (docs/mcp.md); undefined
   * (every tool) when no server of the config says `default` either way.
   */
  defaultToolSet(scope: CatalogScope): readonly string[] | undefined {
    if (![...this.servers.values()].some((s) => s.config.default !== undefined)) return undefined;
    const marked = this.serverNames(scope).filter((name) => this.servers.get(name)!.config.default);
    return [...this.builtins.keys(), ...marked.map((name) => `${name}${MCP_NAME_SEPARATOR}*`)];
  }

  /** Names of the configured MCP servers a tenant may use. */
  serverNames(scope: CatalogScope): string[] {
    return [...this.servers].filter(([, s]) => !s.config.tenants || s.config.tenants.includes(scope.tenant)).map(([name]) => name);
  }

  /**
   * Every tool a session of this tenant may be offered, built-ins first. A
   * server that cannot be reached is left out (and logged), not an error: the
   * agent goes on with the rest.
   */
  async tools(scope: CatalogScope): Promise<readonly Tool[]> {
    const names = this.serverNames(scope);
    // Without servers, the same array every time: the agent keeps what it offers by this answer (session-runner.ts offeringOf).
    if (names.length === 0) return (this.builtinList ??= [...this.builtins.values()]);
    const lists = await Promise.all(names.map((name) => this.serverTools(name)));
    return [...this.builtins.values(), ...lists.flat()];
  }

  /** `tools` for a tenant with no servers (the built-ins, fixed once the catalog is made). */
  private builtinList?: readonly Tool[];

  /** The tenant's MCP servers and how each fared (after asking each for its tools: a server that failed is tried again). */
  async serverStatuses(scope: CatalogScope): Promise<ToolServerStatus[]> {
    const names = this.serverNames(scope);
    await Promise.all(names.map((name) => this.serverTools(name)));
    return names.map((name) => {
      const error = this.failures.get(name);
      if (error !== undefined) return { name, status: 'FAILED', error, toolCount: 0 };
      const count = this.listed.get(name);
      return count === undefined ? { name, status: 'NOT_STARTED', toolCount: 0 } : { name, status: 'READY', toolCount: count };
    });
  }

  /** The servers whose last tools/list failed, among the tenant's, with why (no new attempt). */
  failedServers(scope: CatalogScope): Array<{ name: string; error: string }> {
    return this.serverNames(scope).flatMap((name) => {
      const error = this.failures.get(name);
      return error === undefined ? [] : [{ name, error }];
    });
  }

  /** One tool by the name the model used; undefined when it is not the tenant's to use. */
  async find(name: string, scope: CatalogScope): Promise<Tool | undefined> {
    const builtin = this.builtins.get(name);
    if (builtin) return builtin;
    const at = name.indexOf(MCP_NAME_SEPARATOR);
    if (at < 0) return undefined;
    const server = name.slice(0, at);
    if (!this.serverNames(scope).includes(server)) return undefined;
    return (await this.serverTools(server)).find((t) => t.name === name);
  }

  /**
   * Why a tool set (session/tools) is not one this tenant may record, or
   * undefined: each entry is `*`, a built-in, or `<server>__<tool>` /
   * `<server>__*` of a server the tenant may use. (A server's tools are not
   * listed for this: it may be down, or start later.)
   */
  toolSetProblem(set: readonly string[], scope: CatalogScope): string | undefined {
    const servers = new Set(this.serverNames(scope));
    for (const entry of set) {
      if (entry === '*' || this.builtins.has(entry)) continue;
      const at = entry.indexOf(MCP_NAME_SEPARATOR);
      const server = at > 0 ? entry.slice(0, at) : undefined;
      if (!server || !entry.slice(at + MCP_NAME_SEPARATOR.length)) {
        return `"${entry}" is not a tool: name a built-in (${[...this.builtins.keys()].join(', ')}), <server>__<tool>, <server>__* or *`;
      }
      if (!servers.has(server)) return `"${entry}": no MCP server "${server}" is configured for this tenant`;
    }
    return undefined;
  }

  /** A built-in tool's effect (logs from before calls recorded their effect). */
  builtinEffectOf = (name: string): ToolEffect | undefined => this.builtins.get(name)?.effect;

  async close(): Promise<void> {
    await Promise.all([...this.servers.values()].map((s) => s.connection.close()));
    await Promise.all([...this.perSession.values()].map((c) => c.close()));
    this.perSession.clear();
    if (this.listingDir) fs.rmSync(this.listingDir, { recursive: true, force: true });
    if (this.homeDir) fs.rmSync(this.homeDir, { recursive: true, force: true });
    await this.schemaChecks.close();
  }

  /** The empty directory of its own a workspace server is started in to list its tools. */
  private listingDirOf(name: string): string {
    this.listingDir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-mcp-listing-'));
    const dir = path.join(this.listingDir, name);
    fs.mkdirSync(dir, { recursive: true });
    return dir;
  }

  /**
   * A listing instance is held to a session's limits in its directory, as its sessions' instances are in theirs: before,
   * it wrote files of any size, as many as it liked, on the disk Postgres may share. Past the quota it is stopped, what
   * it wrote removed, and the server is FAILED, saying why, for LISTING_RETRY_MS (then started again on next use).
   */
  private listingLimits(name: string, dir: string): ServerLimits {
    const stopped = (why: string) => {
      this.listingStopped.set(name, { why: `stopped: ${why} (in the directory it lists its tools in)`, at: Date.now() });
      this.log(`MCP server "${name}", started to list its tools, was stopped: ${why}`);
      fs.promises
        .rm(dir, { recursive: true, force: true })
        .then(() => fs.promises.mkdir(dir, { recursive: true }))
        .catch((err: unknown) => this.log(`MCP server "${name}": its listing directory could not be emptied`, err));
    };
    return {
      maxFileBytes: this.workspaceLimits.maxFileBytes,
      // An empty directory: nothing in it was accepted before the server started.
      watch: (over, when) => watchWorkspace({ limits: this.workspaceLimits, diskBytes: 0 }, dir, over, when),
      stoppedBetweenCalls: stopped,
    };
  }

  private mcpHome(): string {
    return (this.homeDir ??= fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-mcp-home-')));
  }

  /**
   * The session's own instance of a workspace server, started in its directory on first use, and again
   * once the directory was made again (`made`): the one started before works in a directory that is
   * gone (its mount or working directory holds the removed one), so it is closed.
   */
  private sessionConnection(name: string, sessionId: string, files: FileWorkspace, dir: string): McpServerConnection {
    const key = `${name}\n${sessionId}\n${dir}`;
    const stopped = this.stoppedBetweenCalls.get(key);
    if (stopped !== undefined) {
      this.stoppedBetweenCalls.delete(key);
      throw new ToolError(`stopped between calls: ${stopped}; what it wrote since its last call was undone, and the next call starts it again`);
    }
    const made = files.made;
    let connection = this.perSession.get(key);
    if (connection) this.perSession.delete(key);
    if (connection && this.madeFor.get(connection) !== made) {
      void connection.close();
      connection = undefined;
    }
    if (!connection) {
      const config = this.servers.get(name)!.config;
      // Held to the session's limits for as long as its process lives, between calls too (ServerLimits).
      connection = new McpServerConnection(name, config, this.log, dir, this.mcpHome(), this.sandbox, config.timeoutMs ?? this.toolTimeoutMs, {
        maxFileBytes: files.limits.maxFileBytes,
        watch: (over, when) => watchWorkspace(files, dir, over, when),
        stoppedBetweenCalls: (why) => {
          this.log(`MCP server "${name}" of session ${sessionId} was stopped between its calls: ${why}; what it wrote since is undone`);
          this.stoppedBetweenCalls.set(key, why);
          files.undo();
        },
      });
      this.madeFor.set(connection, made);
    }
    this.perSession.set(key, connection);
    if (this.perSession.size > MAX_SESSION_SERVERS) {
      const [oldest, c] = this.perSession.entries().next().value!;
      this.perSession.delete(oldest);
      void c.close();
    }
    return connection;
  }

  /**
   * A server's tools of one tools/list answer, their schemas compiled by the schema worker one after the other (the
   * event loop goes on meanwhile); a schema that does not compile leaves its tool out, and one not compiled now
   * (NotCompiledNow) until `retryAt`, when the list is made again.
   */
  private async makeTools(name: string, infos: readonly McpToolInfo[]): Promise<{ tools: Tool[]; retryAt?: number }> {
    const { connection, config } = this.servers.get(name)!;
    const tools: Tool[] = [];
    const notNow = new Map<string, { retryAt: number; left: number }>();
    for (const info of infos) {
      try {
        const input = await this.schemaChecks.check(name, info.inputSchema);
        const output = info.outputSchema && (await this.schemaChecks.check(name, info.outputSchema));
        tools.push(
          mcpTool(connection, info, {
            trusted: config.trusted,
            effect: config.tools[info.name]?.effect ?? config.effect,
            approval: config.tools[info.name]?.approval ?? config.approval,
            timeoutMs: config.timeoutMs,
            checks: output ? { input, output } : { input },
            ...(isStdioServer(config) && config.workspace
              ? {
                  workspace: {
                    files: config.workspace,
                    connectionFor: (sessionId: string, files: FileWorkspace, dir: string) => this.sessionConnection(name, sessionId, files, dir),
                  },
                }
              : {}),
          }),
        );
      } catch (err) {
        if (err instanceof NotCompiledNow) {
          const why = notNow.get(err.message) ?? { retryAt: err.retryAt, left: 0 };
          why.retryAt = Math.max(why.retryAt, err.retryAt);
          why.left++;
          notNow.set(err.message, why);
        } else this.log(`MCP server "${name}": tool "${info.name}" is not offered: its schema cannot be used`, err);
      }
    }
    if (notNow.size === 0) return { tools };
    for (const [why, { retryAt, left }] of notNow) {
      this.log(`MCP server "${name}": ${left} of its tools are not offered until ${new Date(retryAt).toISOString()}: ${why}`);
    }
    return { tools, retryAt: Math.min(...[...notNow.values()].map((n) => n.retryAt)) };
  }

  private async serverTools(name: string): Promise<Tool[]> {
    const { connection } = this.servers.get(name)!;
    const stopped = this.listingStopped.get(name);
    if (stopped && Date.now() - stopped.at < LISTING_RETRY_MS) {
      this.failures.set(name, stopped.why);
      return [];
    }
    this.listingStopped.delete(name);
    try {
      const infos = await connection.listTools();
      const made = this.made.get(infos);
      let list = made && (await made);
      if (!list || (list.retryAt !== undefined && Date.now() >= list.retryAt)) {
        const making = this.makeTools(name, infos);
        this.made.set(infos, making);
        list = await making;
      }
      const { tools } = list;
      this.failures.delete(name);
      this.listed.set(name, tools.length);
      return tools;
    } catch (err) {
      this.log(`MCP server "${name}": its tools are not offered (tools/list failed)`, loggedError(err));
      // toolServers answers it to the tenant's readers: without what the config has forkline send the server (core/secrets.ts).
      this.failures.set(name, withoutSecrets(err instanceof Error ? err.message : String(err), connection.secrets).slice(0, 1000));
      return [];
    }
  }
}
