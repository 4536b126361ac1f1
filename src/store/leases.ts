// One runner per session across processes (DESIGN §6): a session-level
// Postgres advisory lock, held on its own connection while the agent works.
// A process that dies loses its connection and with it the lock, so another
// process can take the session over (and repairs it first, DESIGN §4).
import pg from 'pg';

export interface Lease {
  sessionId: string;
  release(): Promise<void>;
}

export class LeaseManager {
  private readonly pool: pg.Pool;

  constructor(config: pg.PoolConfig, max = 64) {
    this.pool = new pg.Pool({ ...config, max });
    this.pool.on('error', () => {});
  }

  async tryAcquire(sessionId: string): Promise<Lease | null> {
    const client = await this.pool.connect();
    try {
      const { rows } = await client.query<{ ok: boolean }>(
        `SELECT pg_try_advisory_lock(hashtextextended($1, 7469)) AS ok`,
        [sessionId],
      );
      if (!rows[0].ok) {
        client.release();
        return null;
      }
    } catch (err) {
      client.release(true);
      throw err;
    }
    let released = false;
    return {
      sessionId,
      async release() {
        if (released) return;
        released = true;
        try {
          await client.query(`SELECT pg_advisory_unlock(hashtextextended($1, 7469))`, [sessionId]);
          client.release();
        } catch {
          client.release(true); // a broken connection drops the lock with it
        }
      },
    };
  }

  close(): Promise<void> {
    return this.pool.end();
  }
}
