// MCP servers' tool schemas compiled, and a call's arguments checked against them, in a worker thread
// (schema-worker.ts) the process starts on first use (docs/mcp.md "Names, arguments, results"): one schema under the
// size bounds took 0.1–0.6 s to compile, one of a few hundred bytes (each `pattern` a class of every code point
// repeated 1,000 times: 0.3 s of RE2 each) a minute, and the process's event loop — every request, subscription and
// turn — waited that long. Requests go to the worker one at a time, each bounded in time: one past SCHEMA_TIME_BOUND_MS
// has the worker stopped and a fresh one started for the rest (what the stopped one compiled is compiled again when
// it is next used), and the schema is not compiled now, as when its server's COMPILE_BUDGET is spent.
import { Worker } from 'node:worker_threads';
import { LRUCache } from 'lru-cache';
import type { SchemaAnswer, SchemaDialect, SchemaRequest } from './schema-worker.ts';

/**
 * The time one server's schemas may take the worker to compile in a window: a server lists 256 KiB of tools (about 20
 * schemas just under the size bounds) again at every `tools/list_changed` (at most once a second), each time with
 * schemas of new content, and without it kept the worker, and a core, busy for as long as it went on, every other
 * server's compiles and calls waiting behind it. A server of 1,000 plain tools compiles in 1–2 s.
 */
export const COMPILE_BUDGET = { ms: 5_000, windowMs: 60_000 };

/** The longest one compile, or one check of a call's arguments, may take the worker before it is stopped. */
export const SCHEMA_TIME_BOUND_MS = 2_000;

/** Schemas kept compiled per server (their handles in the worker), by content: as many as the worker's compilers keep (schema-validators.ts). */
const SCHEMAS_KEPT = 2000;

/** The worker's heap: a schema that would take more (its compile) ends the worker, not the process. */
const WORKER_LIMITS = { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 32 };

/** The worker's entry: it loads the TypeScript worker through tsx (schema-worker-start.mjs says why). */
const WORKER_SCRIPT = new URL('./schema-worker-start.mjs', import.meta.url);

/** A schema not compiled now (its server's budget spent, or its compile past the time bound): its tool is offered from `retryAt` on, if compiled then. */
export class NotCompiledNow extends Error {
  constructor(
    message: string,
    readonly retryAt: number,
    /** Why: its server's budget was spent before it (`budget`), or its own compile ran past the time bound (`bound`). */
    readonly why: 'budget' | 'bound' = 'budget',
  ) {
    super(message);
  }
}

/** A value against a compiled schema, checked by the worker; throws when it could not be checked (past the time bound). */
export type ValueCheck = (value: unknown) => Promise<{ valid: true } | { valid: false; errorMessage: string }>;

/** What became of a request: the worker's answer, or why the worker stopped while it ran (`stopped`). */
type Outcome = Exclude<SchemaAnswer, { ready: true } | { heapFull: true }> | { stopped: string };
/** `heapFullMs`: sent once more after the worker's pattern heap filled up under it (heapFull), which took the worker that long. */
type Job = { req: DistributiveOmit<SchemaRequest, 'id'>; done: (outcome: Outcome) => void; heapFullMs?: number };
type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;

interface ServerSchemas {
  /** When the budget's window began, and the worker's time (ms) this server's compiles took in it. */
  windowStart: number;
  spentMs: number;
  /** The handle of each schema the worker compiled, or why it does not compile, by its content. */
  byContent: LRUCache<string, Promise<number | Error>>;
}

export class SchemaChecks {
  private worker?: Worker;
  private ready = false;
  private readonly queue: Job[] = [];
  private current?: { job: Job; id: number; timer: NodeJS.Timeout; sentAt: number };
  private nextId = 1;
  private nextHandle = 1;
  private readonly servers = new Map<string, ServerSchemas>();
  private closed = false;
  private readonly budget: typeof COMPILE_BUDGET;
  private readonly timeBoundMs: number;
  /** Schemas sent to the worker to compile, and workers started again (one ran past the bound, or ended). */
  readonly stats = { compiles: 0, restarts: 0 };

  constructor(
    opts: { budget?: typeof COMPILE_BUDGET; timeBoundMs?: number } = {},
    private readonly log: (msg: string) => void = () => {},
  ) {
    this.budget = opts.budget ?? COMPILE_BUDGET;
    this.timeBoundMs = opts.timeBoundMs ?? SCHEMA_TIME_BOUND_MS;
  }

  /**
   * The check of a server's schema, compiled by the worker once per content (a list asked again sends nothing);
   * throws for a schema that does not compile (kept: not tried again), and NotCompiledNow (not kept).
   */
  async check(server: string, schema: Record<string, unknown>, dialect: SchemaDialect = 'mcp'): Promise<ValueCheck> {
    // An MCP server's schemas and a tenant's response schemas (`dialect` 'response', `server` the tenant) are kept, and budgeted, apart.
    server = `${dialect}:${server}`;
    const schemas = this.schemasOf(server);
    const key = JSON.stringify(schema);
    let compiled = schemas.byContent.get(key);
    if (!compiled) {
      const now = Date.now();
      if (now - schemas.windowStart >= this.budget.windowMs) {
        schemas.windowStart = now;
        schemas.spentMs = 0;
      }
      if (schemas.spentMs >= this.budget.ms) {
        throw new NotCompiledNow(
          `its server's schemas took more than ${this.budget.ms} ms to compile within ${this.budget.windowMs / 1000} s: not compiled now`,
          schemas.windowStart + this.budget.windowMs,
        );
      }
      compiled = this.compileKept(server, dialect, key, schema, schemas);
    }
    const first = await compiled;
    if (first instanceof Error) throw first;
    let handle = first;
    return async (value) => {
      for (let again = false; ; again = true) {
        const outcome = await this.request({ op: 'check', handle, value });
        if ('stopped' in outcome) throw new Error(outcome.stopped);
        if ('valid' in outcome) return outcome.valid ? { valid: true } : { valid: false, errorMessage: outcome.errorMessage };
        // A worker started since it compiled the schema (the one before was stopped): compiled again, checked there.
        if (again || !('missing' in outcome)) throw new Error('the schema worker did not check it');
        const kept = schemas.byContent.get(key);
        const latest = kept && (await kept.catch(() => undefined));
        // Not charged to the server's budget: it paid for this schema once, and the worker was stopped by whatever
        // ran past the bound, any server's (another server's stops would spend this one's budget otherwise).
        const fresh = typeof latest === 'number' && latest !== handle ? latest : await this.compileKept(server, dialect, key, schema, schemas, false);
        if (fresh instanceof Error) throw fresh;
        handle = fresh;
      }
    };
  }

  /** Stops the worker; what is asked of it from now on fails. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.done({ stopped: 'the process is closing' });
    this.finishCurrent({ stopped: 'the process is closing' });
    const worker = this.worker;
    this.worker = undefined;
    await worker?.terminate();
  }

  private schemasOf(server: string): ServerSchemas {
    let schemas = this.servers.get(server);
    if (!schemas) {
      schemas = { windowStart: -Infinity, spentMs: 0, byContent: new LRUCache({ max: SCHEMAS_KEPT }) };
      this.servers.set(server, schemas);
    }
    return schemas;
  }

  /** compile(), kept by the schema's content until it fails (NotCompiledNow: asked again, it is tried again). */
  private compileKept(
    server: string,
    dialect: SchemaDialect,
    key: string,
    schema: Record<string, unknown>,
    schemas: ServerSchemas,
    charged = true,
  ): Promise<number | Error> {
    const compiling = this.compile(server, dialect, schema, charged ? schemas : undefined);
    schemas.byContent.set(key, compiling);
    compiling.catch(() => {
      if (schemas.byContent.get(key) === compiling) schemas.byContent.delete(key);
    });
    return compiling;
  }

  /**
   * A schema's handle in the worker, or why it does not compile; NotCompiledNow when the worker stopped during it (its
   * whole bound spent). `charged`: the budget its time counts against (none for a schema compiled again).
   */
  private async compile(server: string, dialect: SchemaDialect, schema: Record<string, unknown>, charged?: ServerSchemas): Promise<number | Error> {
    const handle = this.nextHandle++;
    this.stats.compiles++;
    const outcome = await this.request({ op: 'compile', server, dialect, handle, schema });
    if ('stopped' in outcome) {
      if (charged) charged.spentMs += this.timeBoundMs;
      const retryAt = charged ? Math.max(charged.windowStart + this.budget.windowMs, Date.now()) : Date.now();
      throw new NotCompiledNow(`${outcome.stopped}: not compiled now`, retryAt, 'bound');
    }
    if (!('ms' in outcome)) return new Error('the schema worker did not compile it');
    if (charged) charged.spentMs += outcome.ms;
    return outcome.error === undefined ? handle : new Error(outcome.error);
  }

  private request(req: Job['req']): Promise<Outcome> {
    if (this.closed) return Promise.resolve({ stopped: 'the process is closing' });
    return new Promise((done) => {
      this.queue.push({ req, done });
      this.pump();
    });
  }

  /** Sends the next request once the worker is ready and has none: its time is the worker's alone, so bounded from then. */
  private pump(): void {
    if (this.current) return;
    if (this.queue.length === 0) {
      // Idle, the worker does not keep the process alive.
      this.worker?.unref();
      return;
    }
    const worker = this.start();
    worker.ref();
    if (!this.ready) return;
    const job = this.queue.shift()!;
    const id = this.nextId++;
    const what = job.req.op === 'compile' ? 'compiling its schema' : 'the check';
    const timer = setTimeout(() => this.restart(`${what} took more than ${this.timeBoundMs} ms`), this.timeBoundMs);
    this.current = { job, id, timer, sentAt: performance.now() };
    try {
      worker.postMessage({ ...job.req, id });
    } catch (err) {
      this.finishCurrent({ stopped: `it could not be sent to the schema worker: ${(err as Error).message}` });
      this.pump();
    }
  }

  private start(): Worker {
    if (this.worker) return this.worker;
    const worker = new Worker(WORKER_SCRIPT, { resourceLimits: WORKER_LIMITS });
    this.worker = worker;
    this.ready = false;
    worker.on('message', (answer: SchemaAnswer) => {
      if (worker !== this.worker) return;
      if ('ready' in answer) {
        this.ready = true;
      } else if ('heapFull' in answer) {
        if (this.current?.id === answer.id) this.heapFull(worker);
      } else if (this.current?.id === answer.id) {
        this.finishCurrent(answer);
      }
      this.pump();
    });
    // Out of memory (WORKER_LIMITS), or any other end: the request it ran fails, the rest go to a fresh worker.
    worker.on('error', (err) => this.lost(worker, `the MCP schema worker failed: ${err.message}`));
    worker.on('exit', (code) => this.lost(worker, `the MCP schema worker exited (code ${code})`));
    return worker;
  }

  private finishCurrent(outcome: Outcome): void {
    const current = this.current;
    if (!current) return;
    clearTimeout(current.timer);
    this.current = undefined;
    // A compile made again after a full heap: its server is charged the worker's time of both tries.
    const { heapFullMs } = current.job;
    current.job.done(heapFullMs !== undefined && 'ms' in outcome ? { ...outcome, ms: outcome.ms + heapFullMs } : outcome);
  }

  /** The running request past the time bound: the worker is stopped (a compile cannot be interrupted otherwise) and another started for the rest. */
  private restart(why: string): void {
    const worker = this.worker;
    this.worker = undefined;
    this.stats.restarts++;
    this.log(`MCP schema worker stopped: ${why}; a fresh one takes the requests after it`);
    void worker?.terminate();
    this.finishCurrent({ stopped: why });
    this.pump();
  }

  /**
   * The worker's pattern engine ran out of its heap during the running request (pattern-engine.ts): the worker is
   * replaced, and the request sent once more, to the fresh one (a check then finds its schema missing and has it
   * compiled again). Out of a fresh heap too, it is the request's own: a compile fails (kept, as a schema that does
   * not compile), a check cannot be made.
   */
  private heapFull(worker: Worker): void {
    const current = this.current!;
    const tookMs = performance.now() - current.sentAt;
    clearTimeout(current.timer);
    this.current = undefined;
    this.worker = undefined;
    this.stats.restarts++;
    void worker.terminate();
    const { job } = current;
    const why = "the schema's patterns need more memory than the pattern engine has";
    if (job.heapFullMs === undefined) {
      this.log(`MCP schema worker stopped: its pattern engine's memory is full; a fresh one takes the request again`);
      this.queue.unshift({ ...job, heapFullMs: tookMs });
    } else if (job.req.op === 'compile') job.done({ id: current.id, ms: job.heapFullMs + tookMs, error: why });
    else job.done({ stopped: why });
    this.pump();
  }

  private lost(worker: Worker, why: string): void {
    if (worker !== this.worker || this.closed) return;
    this.worker = undefined;
    this.stats.restarts++;
    if (this.ready) this.log(`${why}; a fresh one takes the requests after it`);
    else {
      // It did not start: what waits fails now, not a worker started again and again.
      this.log(`${why} before it started: what waited for it is not compiled or checked now`);
      for (const job of this.queue.splice(0)) job.done({ stopped: why });
    }
    this.finishCurrent({ stopped: why });
    this.pump();
  }
}
