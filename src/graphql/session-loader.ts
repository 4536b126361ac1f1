// Per-request batching of session reads by id: the parents of a page's 50
// sessions are one statement, not 50. Resolvers of a list run in one tick;
// DataLoader sends the batch once they have all asked.
//
// No cache across batches (`cache: false`): a subscription's context lives as
// long as the subscription, and a parent's title or status read once must not
// be served stale to every later event. Repeated ids within one batch are
// still one row read.
//
// A batch reads the columns its loads' selections need (session-columns.ts),
// all of them together: a page's parents asked for their title read id,
// createdAt, tenant and title, not the whole row (its inherited ranges, lease…).
import DataLoader from 'dataloader';
import type { SessionColumn, SessionColumns, SessionRow } from '../store/session-rows.ts';
import type { StatementScope } from '../db/statement-deadlines.ts';
import type { TenantStore } from '../store/session-store.ts';
import { asSelected } from './session-columns.ts';

export class SessionLoader {
  // Made on the first load: most requests (a sessions page without parents' fields, an events page) never load one.
  private loader?: DataLoader<string, SessionRow | null>;
  /** What the next batch reads: the union of its loads' columns (null: every column; undefined: no load yet). */
  private columns?: Set<SessionColumn> | null;
  /** The operation's statement scope (Context.statements): one per context, so one for every batch. */
  private statements?: StatementScope;

  constructor(private readonly store: TenantStore) {}

  /** The row of session `id`, with at least `columns` (default: every column), or null; read within `statements`, the operation's scope. */
  load(id: string, columns: SessionColumns = null, statements?: StatementScope): Promise<SessionRow | null> {
    this.statements = statements;
    if (columns === null) this.columns = null;
    else if (this.columns !== null) for (const c of columns) (this.columns ??= new Set()).add(c);
    this.loader ??= new DataLoader(
      async (ids) => {
        const wanted = this.columns;
        this.columns = undefined;
        const columns = wanted ? [...wanted].sort() : null;
        // Rows of another tenant are not found: the same null as a missing id (the view leaves them out).
        const found = new Map((await this.store.sessions.byIds([...new Set(ids)], columns, this.statements)).map((r) => [r.id, asSelected(r)]));
        return ids.map((id) => found.get(id) ?? null);
      },
      { cache: false },
    );
    return this.loader.load(id);
  }
}
