// Per-request batching of session reads by id: the parents of a page's 50
// sessions are one statement, not 50. Resolvers of a list run in one tick;
// the batch goes out on the next.
import type { SessionRow, SessionRows } from '../store/session-rows.ts';

export class SessionLoader {
  private batch: Map<string, Array<(row: SessionRow | null) => void>> | null = null;
  private failures: Array<(err: unknown) => void> = [];

  constructor(
    private readonly rows: SessionRows,
    private readonly tenant: string,
  ) {}

  load(id: string): Promise<SessionRow | null> {
    return new Promise((resolve, reject) => {
      if (!this.batch) {
        this.batch = new Map();
        process.nextTick(() => void this.flush());
      }
      const waiting = this.batch.get(id);
      if (waiting) waiting.push(resolve);
      else this.batch.set(id, [resolve]);
      this.failures.push(reject);
    });
  }

  private async flush() {
    const batch = this.batch!;
    const failures = this.failures;
    this.batch = null;
    this.failures = [];
    try {
      const found = new Map((await this.rows.byIds([...batch.keys()])).filter((r) => r.tenant === this.tenant).map((r) => [r.id, r]));
      for (const [id, waiting] of batch) for (const resolve of waiting) resolve(found.get(id) ?? null);
    } catch (err) {
      for (const reject of failures) reject(err);
    }
  }
}
