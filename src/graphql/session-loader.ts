// Per-request batching of session reads by id: the parents of a page's 50
// sessions are one statement, not 50. Resolvers of a list run in one tick;
// DataLoader sends the batch once they have all asked.
//
// No cache across batches (`cache: false`): a subscription's context lives as
// long as the subscription, and a parent's title or status read once must not
// be served stale to every later event. Repeated ids within one batch are
// still one row read.
import DataLoader from 'dataloader';
import type { SessionRow } from '../store/session-rows.ts';
import type { TenantStore } from '../store/session-store.ts';

export class SessionLoader {
  // Made on the first load: most requests (a sessions page without parents' fields, an events page) never load one.
  private loader?: DataLoader<string, SessionRow | null>;

  constructor(private readonly store: TenantStore) {}

  load(id: string): Promise<SessionRow | null> {
    this.loader ??= new DataLoader(
      async (ids) => {
        // Rows of another tenant are not found: the same null as a missing id (the view leaves them out).
        const found = new Map((await this.store.sessions.byIds([...new Set(ids)])).map((r) => [r.id, r]));
        return ids.map((id) => found.get(id) ?? null);
      },
      { cache: false },
    );
    return this.loader.load(id);
  }
}
