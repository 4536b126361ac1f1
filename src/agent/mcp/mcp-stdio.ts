// The transport of a stdio MCP server, in place of the SDK's
// StdioClientTransport (same public Transport interface, same environment
// rule), so that what a server writes is bounded as a Streamable HTTP
// server's answer is (mcp-http.ts; docs/operations.md "Threat model"):
// - a message (a line of stdout) is at most `maxMessageBytes`: a server that
//   writes more without a newline is killed (its process group), and every
//   request it left open is answered with an error that says why;
// - reading is linear in what the server writes: each chunk is searched once
//   for a newline and a line is joined once (the SDK's buffer joins every
//   chunk to all before it, so a 3 MB line took a second of the event loop);
// - what the server sends unasked (notifications, its own requests) and its
//   stderr are read at most UNASKED_BYTES_PER_S each: past it, reading waits
//   for the next second (a flood waits in the server's pipe, not in this
//   process's event loop); stderr is dropped but for a few lines a minute.
import { spawn, type ChildProcess } from 'node:child_process';
import { getDefaultEnvironment } from '@modelcontextprotocol/sdk/client/stdio.js';
import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import {
  JSONRPCMessageSchema,
  isJSONRPCErrorResponse,
  isJSONRPCNotification,
  isJSONRPCRequest,
  isJSONRPCResultResponse,
  type JSONRPCMessage,
  type RequestId,
} from '@modelcontextprotocol/sdk/types.js';
import { MAX_MESSAGE_BYTES } from './mcp-http.ts';

type Transport = Parameters<Client['connect']>[0];

/** Chunks of a server's stderr logged per minute (each cut to MAX_STDERR_LOG_CHARS). */
const MAX_STDERR_LOGS_PER_MINUTE = 60;
const MAX_STDERR_LOG_CHARS = 2000;
/** How long a closed server has to exit on its own (stdin ended), then after SIGTERM, before SIGKILL. */
const EXIT_GRACE_MS = 2000;
/** JSON-RPC's "internal error": what a request left open by a killed server is answered with. */
const INTERNAL_ERROR = -32603;
const LF = 0x0a;
/** How fast a server's unasked messages, and its stderr, are read (as a Streamable HTTP server's own stream: mcp-http.ts). */
const UNASKED_BYTES_PER_S = 256 * 1024;

/** Counts bytes per second; `over` pauses `stream` until the second is out. */
function rateGate(stream: NodeJS.ReadableStream, bytesPerSecond: number) {
  let windowStart = Date.now();
  let bytes = 0;
  let paused = false;
  return (n: number) => {
    const now = Date.now();
    if (now - windowStart >= 1000) [windowStart, bytes] = [now, 0];
    bytes += n;
    if (bytes < bytesPerSecond || paused) return;
    paused = true;
    stream.pause();
    setTimeout(
      () => {
        paused = false;
        [windowStart, bytes] = [Date.now(), 0];
        stream.resume();
      },
      windowStart + 1000 - now,
    ).unref();
  };
}

export interface StdioServerOptions {
  command: string;
  args: string[];
  /** Given on top of the SDK's default environment (HOME, LOGNAME, PATH, SHELL, TERM, USER). */
  env?: Record<string, string>;
  cwd?: string;
  maxMessageBytes?: number;
  /** The server's own name, for the log. */
  name: string;
  log: (msg: string, err?: unknown) => void;
}

/**
 * Splits a byte stream into lines without copying what it has already looked at:
 * `push` answers the complete lines (without their "\n" and a "\r" before it), or
 * an error once a line passes `max` bytes (what it holds then is dropped).
 */
export class LineSplitter {
  private chunks: Buffer[] = [];
  private held = 0;

  constructor(private readonly max: number) {}

  push(chunk: Buffer): string[] | Error {
    const lines: string[] = [];
    let start = 0;
    for (let at = chunk.indexOf(LF); at !== -1; at = chunk.indexOf(LF, start)) {
      if (this.held + at - start > this.max) return this.overflow();
      const line = this.held === 0 ? chunk.subarray(start, at) : Buffer.concat([...this.chunks, chunk.subarray(start, at)]);
      this.chunks = [];
      this.held = 0;
      const end = line.length > 0 && line[line.length - 1] === 0x0d ? line.length - 1 : line.length;
      lines.push(line.toString('utf8', 0, end));
      start = at + 1;
    }
    if (start < chunk.length) {
      this.held += chunk.length - start;
      if (this.held > this.max) return this.overflow();
      this.chunks.push(chunk.subarray(start));
    }
    return lines;
  }

  private overflow(): Error {
    this.chunks = [];
    this.held = 0;
    return new Error(`a message over ${this.max} bytes`);
  }
}

export class BoundedStdioTransport implements Transport {
  onclose?: () => void;
  onerror?: (error: Error) => void;
  onmessage?: Transport['onmessage'];
  private child?: ChildProcess;
  /** The server's process group (its pid): killed whole, what it started with it. */
  private group?: number;
  private exited?: Promise<void>;
  private readonly lines: LineSplitter;
  /** Requests sent and not answered yet: a server killed for its output leaves them answered with why. */
  private readonly open = new Set<RequestId>();
  private killedFor?: string;

  constructor(private readonly opts: StdioServerOptions) {
    this.lines = new LineSplitter(opts.maxMessageBytes ?? MAX_MESSAGE_BYTES);
  }

  start(): Promise<void> {
    if (this.child) throw new Error('the MCP server is already started');
    const o = this.opts;
    return new Promise((resolve, reject) => {
      const child = spawn(o.command, o.args, {
        env: { ...getDefaultEnvironment(), ...o.env },
        cwd: o.cwd,
        stdio: ['pipe', 'pipe', 'pipe'],
        // Its own process group: what it started goes with it when it is killed.
        detached: true,
      });
      this.child = child;
      this.group = child.pid;
      this.exited = new Promise((r) => child.once('close', () => r()));
      child.once('error', (err) => {
        reject(err);
        this.onerror?.(err);
      });
      child.once('spawn', () => resolve());
      child.once('close', (code, signal) => {
        this.child = undefined;
        this.answerOpen(this.killedFor ?? `the MCP server exited (${signal ? `killed by ${signal}` : `exit code ${code}`})`);
        this.onclose?.();
      });
      child.stdin!.on('error', (err) => this.onerror?.(err));
      child.stdout!.on('error', (err) => this.onerror?.(err));
      const unasked = rateGate(child.stdout!, UNASKED_BYTES_PER_S);
      child.stdout!.on('data', (chunk: Buffer) => this.read(chunk, unasked));
      this.logStderr(child);
    });
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  async send(message: JSONRPCMessage): Promise<void> {
    const stdin = this.child?.stdin;
    if (!stdin || this.killedFor) throw new Error('Not connected');
    if (isJSONRPCRequest(message)) this.open.add(message.id);
    // A cancelled request is not answered (the SDK has given up on it).
    if (isJSONRPCNotification(message) && message.method === 'notifications/cancelled') this.open.delete(message.params?.requestId as RequestId);
    if (stdin.write(`${JSON.stringify(message)}\n`)) return;
    // The server does not read: wait for it, or for its end.
    await new Promise<void>((resolve) => {
      const done = () => {
        stdin.off('drain', done);
        stdin.off('close', done);
        resolve();
      };
      stdin.once('drain', done);
      stdin.once('close', done);
    });
  }

  async close(): Promise<void> {
    const child = this.child;
    if (child) {
      try {
        child.stdin?.end();
      } catch {
        // already closed
      }
      if (!(await this.exitsWithin(EXIT_GRACE_MS))) {
        this.signal('SIGTERM');
        await this.exitsWithin(EXIT_GRACE_MS);
      }
    }
    // What it started and left behind goes too.
    this.signal('SIGKILL');
  }

  private read(chunk: Buffer, unasked: (bytes: number) => void): void {
    if (this.killedFor) return;
    const lines = this.lines.push(chunk);
    if (lines instanceof Error) {
      const why = `the MCP server wrote ${lines.message}: it was stopped`;
      this.killedFor = why;
      this.opts.log(`MCP server "${this.opts.name}" wrote ${lines.message} (the limit of one message): it was stopped`);
      this.signal('SIGKILL');
      this.child?.stdout?.destroy();
      this.answerOpen(why);
      return;
    }
    for (const line of lines) {
      if (line.length === 0) continue;
      let message: JSONRPCMessage;
      try {
        message = JSONRPCMessageSchema.parse(JSON.parse(line));
      } catch (err) {
        this.onerror?.(err as Error);
        continue;
      }
      if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined && this.open.has(message.id)) {
        this.open.delete(message.id);
      } else if (!this.aboutOpenRequest(message)) {
        unasked(line.length);
      }
      this.onmessage?.(message);
    }
  }

  /** Progress of a request still open is part of its answer (as on a Streamable HTTP request's own stream, which is not rate-bounded). */
  private aboutOpenRequest(message: JSONRPCMessage): boolean {
    if (!isJSONRPCNotification(message) || message.method !== 'notifications/progress') return false;
    const token = message.params?.progressToken;
    return (typeof token === 'string' || typeof token === 'number') && this.open.has(token);
  }

  /** Answers every open request with an error saying why (the SDK would say only "Connection closed"). */
  private answerOpen(why: string | undefined): void {
    if (!why) return;
    const ids = [...this.open];
    this.open.clear();
    for (const id of ids) this.onmessage?.({ jsonrpc: '2.0', id, error: { code: INTERNAL_ERROR, message: why } });
  }

  private signal(sig: NodeJS.Signals): void {
    if (this.group === undefined) return;
    try {
      process.kill(-this.group, sig);
    } catch {
      // already gone
    }
  }

  private async exitsWithin(ms: number): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<false>((r) => (timer = setTimeout(() => r(false), ms).unref()));
    const exited = await Promise.race([(this.exited ?? Promise.resolve()).then(() => true), timeout]);
    clearTimeout(timer);
    return exited;
  }

  /** A server's stderr is logged a few chunks a minute at most: a flood of it is not a flood of our log, nor of our memory. */
  private logStderr(child: ChildProcess): void {
    let window = 0;
    let logged = 0;
    const name = this.opts.name;
    const gate = rateGate(child.stderr!, UNASKED_BYTES_PER_S);
    child.stderr!.on('data', (chunk: Buffer) => {
      gate(chunk.length);
      const now = Date.now();
      if (now - window >= 60_000) [window, logged] = [now, 0];
      if (++logged <= MAX_STDERR_LOGS_PER_MINUTE) this.opts.log(`MCP server "${name}": ${chunk.toString('utf8', 0, MAX_STDERR_LOG_CHARS).trimEnd()}`);
      else if (logged === MAX_STDERR_LOGS_PER_MINUTE + 1) this.opts.log(`MCP server "${name}": more stderr this minute is not logged`);
    });
  }
}
