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
//   stderr are read at most UNASKED_BYTES_PER_S each, and its unasked messages
//   at most UNASKED_MESSAGES_PER_S: past it, reading waits for the next second
//   (a flood waits in the server's pipe, not in this process's event loop);
//   stderr is dropped but for a few lines a minute;
// - a call may be sent at most MAX_STREAM_MESSAGES progress notifications and
//   `maxMessageBytes` besides its answer (as on a Streamable HTTP call's own
//   stream): past it the call is an error saying so, and the server is told
//   it is cancelled;
// - lines are handled at most LINES_PER_TURN at a time, the event loop let go
//   between (reading waits meanwhile): the SDK parses and handles each message
//   as it comes, so a pipe read of hundreds of small messages was one stretch.
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
import { MAX_MESSAGE_BYTES, MAX_STREAM_MESSAGES, UNASKED_MESSAGES_PER_S } from './mcp-http.ts';

type Transport = Parameters<Client['connect']>[0];

/** Chunks of a server's stderr logged per minute (each cut to MAX_STDERR_LOG_CHARS). */
const MAX_STDERR_LOGS_PER_MINUTE = 60;
const MAX_STDERR_LOG_CHARS = 2000;
/** How long a closed server has to exit on its own (stdin ended), then after SIGTERM, before SIGKILL. */
const EXIT_GRACE_MS = 2000;
/**
 * Once the server has exited, its pipes are closed past this (what it wrote before it went is read meanwhile): a
 * process it started that left its group (`setsid`) may hold them open, and the server would never be seen gone.
 */
const PIPES_GRACE_MS = 1000;
/** JSON-RPC's "internal error": what a request left open by a killed server is answered with. */
const INTERNAL_ERROR = -32603;
const LF = 0x0a;
/** How fast a server's unasked messages, and its stderr, are read (as a Streamable HTTP server's own stream: mcp-http.ts). */
const UNASKED_BYTES_PER_S = 256 * 1024;
/** Lines of stdout handled in one turn of the event loop (and their bytes: one longer line is handled alone). */
const LINES_PER_TURN = 32;
const BYTES_PER_TURN = 64 * 1024;

/** Pauses a stream while anything holds it (a rate gate, lines not handled yet); once nothing does, resumes it and calls `free`. */
class ReadHolds {
  private readonly held = new Set<string>();

  constructor(
    private readonly stream: NodeJS.ReadableStream,
    private readonly free: () => void = () => {},
  ) {}

  has(why: string): boolean {
    return this.held.has(why);
  }

  hold(why: string): void {
    if (this.held.size === 0) this.stream.pause();
    this.held.add(why);
  }

  release(why: string): void {
    if (!this.held.delete(why) || this.held.size > 0) return;
    this.stream.resume();
    this.free();
  }
}

/** Counts bytes and messages per second; past either, `holds` holds reading until the second is out. */
function rateGate(holds: ReadHolds, bytesPerSecond: number, messagesPerSecond = Infinity) {
  let windowStart = Date.now();
  let bytes = 0;
  let messages = 0;
  return (n: number) => {
    const now = Date.now();
    if (now - windowStart >= 1000) [windowStart, bytes, messages] = [now, 0, 0];
    bytes += n;
    messages++;
    if ((bytes < bytesPerSecond && messages < messagesPerSecond) || holds.has('rate')) return;
    holds.hold('rate');
    setTimeout(
      () => {
        [windowStart, bytes, messages] = [Date.now(), 0, 0];
        holds.release('rate');
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
  /** What each open request has been sent besides its answer (progress): bounded as a call's own HTTP stream is. */
  private readonly beside = new Map<RequestId, { messages: number; bytes: number }>();
  private killedFor?: string;
  /** Lines read and not handled yet (reading is held while there are). */
  private backlog: string[] = [];
  private handled = 0;
  private stdoutHolds?: ReadHolds;
  private unasked: (bytes: number) => void = () => {};

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
      child.once('exit', () => {
        // Held by a daemon it started, the pipes never close by themselves: before, a server stopped with one running
        // was never seen gone, and every later call failed "Not connected", the server never started again.
        setTimeout(() => {
          child.stdin?.destroy();
          child.stdout?.destroy();
          child.stderr?.destroy();
        }, PIPES_GRACE_MS).unref();
      });
      child.once('close', (code, signal) => {
        this.child = undefined;
        // What it wrote before it went is handled first (its last answers may be among it).
        while (this.handled < this.backlog.length && !this.killedFor) this.handleLine(this.backlog[this.handled++]);
        [this.backlog, this.handled] = [[], 0];
        this.answerOpen(this.killedFor ?? `the MCP server exited (${signal ? `killed by ${signal}` : `exit code ${code}`})`);
        this.onclose?.();
      });
      child.stdin!.on('error', (err) => this.onerror?.(err));
      child.stdout!.on('error', (err) => this.onerror?.(err));
      const holds = (this.stdoutHolds = new ReadHolds(child.stdout!, () => this.handle()));
      this.unasked = rateGate(holds, UNASKED_BYTES_PER_S, UNASKED_MESSAGES_PER_S);
      child.stdout!.on('data', (chunk: Buffer) => this.read(chunk));
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
    if (isJSONRPCNotification(message) && message.method === 'notifications/cancelled') this.settle(message.params?.requestId as RequestId);
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

  /** Kills the server and what it started at once (no grace: it is doing harm), its open requests answered with `why`. */
  kill(why: string): void {
    if (this.killedFor) return;
    this.killedFor = why;
    this.signal('SIGKILL');
    // Its pipes too, which a process that left its group may hold: it is seen gone once it has exited.
    this.child?.stdout?.destroy();
    this.child?.stderr?.destroy();
    this.child?.stdin?.destroy();
    this.answerOpen(why);
  }

  private read(chunk: Buffer): void {
    if (this.killedFor) return;
    const lines = this.lines.push(chunk);
    if (lines instanceof Error) {
      this.opts.log(`MCP server "${this.opts.name}" wrote ${lines.message} (the limit of one message): it was stopped`);
      this.kill(`the MCP server wrote ${lines.message}: it was stopped`);
      return;
    }
    for (const line of lines) if (line.length > 0) this.backlog.push(line);
    this.handle();
  }

  /** Handles the lines read, LINES_PER_TURN (BYTES_PER_TURN) a turn of the event loop, while no rate gate holds reading. */
  private handle(): void {
    const holds = this.stdoutHolds;
    if (!holds || holds.has('backlog')) return;
    let lines = 0;
    let bytes = 0;
    while (this.handled < this.backlog.length && !this.killedFor && !holds.has('rate')) {
      if (lines >= LINES_PER_TURN || bytes >= BYTES_PER_TURN) {
        holds.hold('backlog');
        setImmediate(() => holds.release('backlog'));
        return;
      }
      const line = this.backlog[this.handled++];
      lines++;
      bytes += line.length;
      this.handleLine(line);
    }
    if (this.handled >= this.backlog.length || this.killedFor) [this.backlog, this.handled] = [[], 0];
  }

  private handleLine(line: string): void {
    let message: JSONRPCMessage;
    try {
      message = JSONRPCMessageSchema.parse(JSON.parse(line));
    } catch (err) {
      // A line that is no message was sent unasked too: before, a flood of them was parsed as fast as it came (half a CPU).
      this.unasked(line.length);
      this.onerror?.(err as Error);
      return;
    }
    if ((isJSONRPCResultResponse(message) || isJSONRPCErrorResponse(message)) && message.id !== undefined && this.open.has(message.id)) {
      this.settle(message.id);
    } else {
      const about = this.openRequestOf(message);
      if (about === undefined) this.unasked(line.length);
      else if (!this.besideAnswer(about, line.length)) return;
    }
    this.onmessage?.(message);
  }

  /** The open request a message is progress of (part of its answer, as on a Streamable HTTP request's own stream), or undefined. */
  private openRequestOf(message: JSONRPCMessage): RequestId | undefined {
    if (!isJSONRPCNotification(message) || message.method !== 'notifications/progress') return undefined;
    const token = message.params?.progressToken;
    return (typeof token === 'string' || typeof token === 'number') && this.open.has(token) ? token : undefined;
  }

  /**
   * Counts a message sent about `id` besides its answer; past MAX_STREAM_MESSAGES or `maxMessageBytes`, answers
   * the request with an error saying so, tells the server it is cancelled, and answers false (the message is dropped).
   */
  private besideAnswer(id: RequestId, bytes: number): boolean {
    const max = this.opts.maxMessageBytes ?? MAX_MESSAGE_BYTES;
    const sent = this.beside.get(id) ?? { messages: 0, bytes: 0 };
    this.beside.set(id, sent);
    sent.messages++;
    sent.bytes += bytes;
    if (sent.messages <= MAX_STREAM_MESSAGES && sent.bytes <= max) return true;
    const why = `the MCP server sent over ${MAX_STREAM_MESSAGES} messages or ${max} bytes about the call besides its answer: the call was given up`;
    this.opts.log(`MCP server "${this.opts.name}": ${why}`);
    this.settle(id);
    this.onmessage?.({ jsonrpc: '2.0', id, error: { code: INTERNAL_ERROR, message: why } });
    void this.send({ jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: id, reason: why } }).catch(() => {});
    return false;
  }

  /** A request answered or given up: no longer open. */
  private settle(id: RequestId): void {
    this.open.delete(id);
    this.beside.delete(id);
  }

  /** Answers every open request with an error saying why (the SDK would say only "Connection closed"). */
  private answerOpen(why: string | undefined): void {
    if (!why) return;
    const ids = [...this.open];
    this.open.clear();
    this.beside.clear();
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
    const gate = rateGate(new ReadHolds(child.stderr!), UNASKED_BYTES_PER_S);
    child.stderr!.on('data', (chunk: Buffer) => {
      gate(chunk.length);
      const now = Date.now();
      if (now - window >= 60_000) [window, logged] = [now, 0];
      if (++logged <= MAX_STDERR_LOGS_PER_MINUTE) this.opts.log(`MCP server "${name}": ${chunk.toString('utf8', 0, MAX_STDERR_LOG_CHARS).trimEnd()}`);
      else if (logged === MAX_STDERR_LOGS_PER_MINUTE + 1) this.opts.log(`MCP server "${name}": more stderr this minute is not logged`);
    });
  }
}
