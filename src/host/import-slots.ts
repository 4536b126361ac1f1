// The process's recording-import slots (docs/operations.md "Memory and time"): each import holds a pool connection
// for its whole transaction, so at most FORKLINE_MAX_IMPORTS_AT_ONCE run; the others wait holding none. Shared by
// every tenant, the wait must not be one tenant's to fill: a tenant has at most FORKLINE_MAX_IMPORTS_PER_TENANT
// running or waiting (past it RATE_LIMITED, HTTP 429 with Retry-After, whichever door it came through), and a free
// slot goes to the tenants in turn, not in arrival order. Before, the queue was one FIFO: a tenant that queued 50
// imports made another tenant's single upload wait behind all 50.
import PQueue, { type Queue, type QueueAddOptions } from 'p-queue';
import { ForklineError } from '../core/errors.ts';

/** Imports one tenant may have running plus waiting for a slot, by default (FORKLINE_MAX_IMPORTS_PER_TENANT). */
export const DEFAULT_IMPORTS_PER_TENANT = 4;
/** Seconds a refused importer is told to wait (an import of a large recording takes tens of seconds). */
export const IMPORTS_RETRY_AFTER_SECONDS = 5;

type Run = () => Promise<unknown>;
interface TenantOptions extends QueueAddOptions {
  tenant: string;
}

/**
 * p-queue's queue (its `queueClass`): each tenant's waiting imports in arrival order, the tenants served in turn
 * (round-robin). A Map keeps insertion order: the tenant first in it is served next and goes to the back.
 */
class TenantsInTurn implements Queue<Run, TenantOptions> {
  readonly #waiting = new Map<string, { id?: string; run: Run }[]>();
  #size = 0;

  get size() {
    return this.#size;
  }

  enqueue(run: Run, options?: Partial<TenantOptions>) {
    const tenant = options?.tenant ?? '';
    const line = this.#waiting.get(tenant);
    if (line) line.push({ id: options?.id, run });
    else this.#waiting.set(tenant, [{ id: options?.id, run }]);
    this.#size++;
  }

  dequeue(): Run | undefined {
    for (const [tenant, line] of this.#waiting) {
      const next = line.shift()!;
      this.#waiting.delete(tenant);
      if (line.length) this.#waiting.set(tenant, line);
      this.#size--;
      return next.run;
    }
    return undefined;
  }

  /** p-queue's abort of a waiting task (its signal): the task leaves its tenant's line. */
  remove(id: string) {
    for (const [tenant, line] of this.#waiting) {
      const i = line.findIndex((e) => e.id === id);
      if (i === -1) continue;
      line.splice(i, 1);
      if (!line.length) this.#waiting.delete(tenant);
      this.#size--;
      return;
    }
  }

  filter(options: Readonly<Partial<TenantOptions>>): Run[] {
    const lines = options.tenant === undefined ? [...this.#waiting.values()] : [this.#waiting.get(options.tenant) ?? []];
    return lines.flat().map((e) => e.run);
  }

  setPriority(): void {
    throw new Error('import slots have no priorities');
  }
}

export class ImportSlots {
  readonly #queue: PQueue<TenantsInTurn, TenantOptions>;
  /** Imports admitted per tenant: running, waiting for a slot, or waiting for an earlier import with their key. */
  readonly #held = new Map<string, number>();

  constructor(
    atOnce: number,
    /** Imports one tenant may have running plus waiting (FORKLINE_MAX_IMPORTS_PER_TENANT). */
    readonly perTenant: number,
  ) {
    this.#queue = new PQueue({ concurrency: atOnce, queueClass: TenantsInTurn });
  }

  /**
   * Counts one import of the tenant until the returned release is called, or refuses it (RATE_LIMITED) when the
   * tenant has its share already: refused before it waits, so a tenant's backlog is bounded, not just ordered.
   */
  admit(tenant: string): () => void {
    const refused = this.refusal(tenant);
    if (refused) throw refused;
    this.#held.set(tenant, (this.#held.get(tenant) ?? 0) + 1);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      const left = (this.#held.get(tenant) ?? 1) - 1;
      if (left > 0) this.#held.set(tenant, left);
      else this.#held.delete(tenant);
    };
  }

  /**
   * The refusal an import of `tenant` would get now (its share is full), or undefined: asked by a door before it reads
   * an upload's body, so a tenant at its share does not make the process spool bodies only to refuse them.
   */
  refusal(tenant: string): ForklineError | undefined {
    if ((this.#held.get(tenant) ?? 0) < this.perTenant) return undefined;
    return new ForklineError(
      'RATE_LIMITED',
      `at most ${this.perTenant} recording imports of a tenant run or wait at once (FORKLINE_MAX_IMPORTS_PER_TENANT); retry when one has finished`,
      { retryAfterSeconds: IMPORTS_RETRY_AFTER_SECONDS, http: { status: 429, headers: { 'Retry-After': String(IMPORTS_RETRY_AFTER_SECONDS) } } },
    );
  }

  /** Imports of `tenant` admitted (running, waiting for a slot or for an earlier import with their key), and those of every tenant waiting for a slot. */
  counts(tenant: string): { admitted: number; waiting: number } {
    return { admitted: this.#held.get(tenant) ?? 0, waiting: this.#queue.size };
  }

  /** Runs `task` once a slot is free and it is the tenant's turn; `signal` aborted while it waits takes it out of the line. */
  run<T>(tenant: string, task: () => Promise<T>, signal?: AbortSignal): Promise<T> {
    return this.#queue.add(task, { tenant, signal }) as Promise<T>;
  }
}
