// The raw baseline of readThroughput: a minimal node:http handler on a pg pool
// of the same size, running the same SQL forkline's reads run and writing the
// same JSON shape — the physical limit of a Node server here. Not a product:
// it knows one tenant and answers two queries (and `{ __typename }`, which reads
// nothing: a request's fixed cost). Prints its URL when listening.
import http from 'node:http';
import pg from 'pg';
import { pgConfigFromUrl } from '../src/db/pg-config.ts';
import { storeTypes, timestampsAsText } from '../src/db/pg-types.ts';
import { DEFAULT_POOL_MAX } from '../src/db/database.ts';
import { eventId } from '../src/store/ids.ts';

// The store's pool settings (size, type parsers).
const pool = new pg.Pool({ ...pgConfigFromUrl(process.env.DATABASE_URL!), max: Number(process.env.DATABASE_POOL_MAX ?? DEFAULT_POOL_MAX), types: storeTypes });

// forkline's statements for these two queries, as its log shows them: the
// columns the query selects, bounds in SQL, prepared.
const SESSIONS =
  'SELECT "createdAt", "eventCount", "id", "parentId", "title", "turnCount" FROM "Session" WHERE tenant = $1 ORDER BY "createdAt" DESC, id DESC LIMIT $2';
// Rows are read by session and tree (the tree is looked up once per session, as the store caches it).
const SESSION =
  'SELECT "createdAt", "eventCount", "id", "inheritedEventCount", "inheritedRanges", "treeId" FROM "Session" WHERE id = $1 AND "treeId" = $3 AND tenant = $2';
const EVENTS = 'SELECT seq, type, data, synthetic, "createdAt" FROM "Event" WHERE "sessionId" = $1 AND seq BETWEEN $2 AND $3 AND "treeId" = $4 ORDER BY seq';
const trees = new Map<string, string | undefined>();
async function treeOf(id: string): Promise<string | undefined> {
  if (!trees.has(id)) trees.set(id, (await pool.query('SELECT "treeId" FROM "SessionTree" WHERE id = $1', [id])).rows[0]?.treeId);
  return trees.get(id);
}

async function answer(query: string, variables: Record<string, any>): Promise<unknown> {
  if (query === '{ __typename }') return { data: { __typename: 'Query' } };
  if (query.includes('sessions(')) {
    // createdAt orders the page and is not written: left as text, unparsed, as forkline's page rows leave it.
    const { rows } = await pool.query({ name: 'raw_sessions', text: SESSIONS, values: ['local', 51], types: timestampsAsText });
    return {
      data: {
        sessions: {
          edges: rows.slice(0, 50).map((r) => ({
            node: { id: r.id, title: r.title, eventCount: r.eventCount, turnCount: r.turnCount, parent: r.parentId ? { id: r.parentId } : null },
          })),
        },
      },
    };
  }
  const after = Number(variables.after);
  const tree = await treeOf(variables.id);
  const {
    rows: [session],
  } = tree === undefined ? { rows: [] } : await pool.query({ name: 'raw_session', text: SESSION, values: [variables.id, 'local', tree] });
  if (!session) return { data: { session: null } };
  const to = Math.min(after + 101, session.eventCount - 1); // the page and one more: is there a next page?
  const { rows } = await pool.query({ name: 'raw_events', text: EVENTS, values: [variables.id, after + 1, to, tree] });
  return {
    data: {
      session: {
        events: {
          edges: rows.slice(0, 100).map((r) => ({
            node: {
              id: eventId(variables.id, r.seq),
              seq: r.seq,
              type: r.type,
              data: r.data,
              inherited: false,
              synthetic: r.synthetic,
              createdAt: r.createdAt.toISOString(),
            },
          })),
        },
      },
    },
  };
}

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c) => chunks.push(c));
  req.on('end', async () => {
    try {
      const { query, variables } = JSON.parse(Buffer.concat(chunks).toString());
      const body = JSON.stringify(await answer(query, variables ?? {}));
      res.writeHead(200, { 'content-type': 'application/json; charset=utf-8', 'content-length': Buffer.byteLength(body) }).end(body);
    } catch (err) {
      res.writeHead(500).end(String(err));
    }
  });
});
server.listen(0, '127.0.0.1', () => console.log(`listening http://127.0.0.1:${(server.address() as import('node:net').AddressInfo).port}/graphql`));
process.on('SIGTERM', () => server.close(() => void pool.end().then(() => process.exit(0))));
