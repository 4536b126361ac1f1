// GET /sessions/<id>/events through the real HTTP server: a final page (full,
// with a next page) has a stable ETag and is immutable, a conditional GET is a
// 304, a page touching the head is not cached, another tenant never gets the
// page, a fork's inherited prefix reads as through GraphQL, and the body is the
// GraphQL events page itself.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createForklineClient, ForklineClientError } from '@forkline/client';
import type { TestApp } from '../../helpers/app.ts';
import { A, B, TOKEN_A, TOKEN_B, startTwoTenantApp } from '../../helpers/two-tenants.ts';

const TURNS = 30; // 1 + 30 * 6 = 181 events

let app: TestApp;
let root: string;
let child: string;
const CUT = 120;

const pageUrl = (id: string, q: string) => new URL(`/sessions/${encodeURIComponent(id)}/events${q}`, app.url).toString();
const get = (id: string, q: string, headers: Record<string, string> = A) => fetch(pageUrl(id, q), { headers });

const EVENTS = `query($id: ID!, $after: Int, $first: Int) { session(id: $id) { events(afterSeq: $after, first: $first) {
  edges { cursor node { id seq type data inherited synthetic createdAt sessionId } } pageInfo { hasNextPage hasPreviousPage startCursor endCursor } } } }`;

beforeAll(async () => {
  app = await startTwoTenantApp();
  const store = app.services.store;
  root = (await store.createSession({ tenant: 'alpha' }, { title: 'paged' })).id;
  for (let t = 1; t <= TURNS; t++) {
    await store.append(root, [
      { type: 'inbox/add', data: { inputId: `in_${t}`, text: `question ${t}` } },
      { type: 'inbox/remove', data: { inputId: `in_${t}`, reason: 'taken' } },
      { type: 'turn/start', data: { turn: t, inputId: `in_${t}` } },
      { type: 'step/start', data: { turn: t, step: 1 } },
      { type: 'model/message', data: { turn: t, step: 1, text: `answer ${t}`, toolCalls: [] } },
      { type: 'step/end', data: { turn: t, step: 1, reason: 'completed' } },
    ]);
    await store.append(root, [{ type: 'turn/end', data: { turn: t, reason: 'completed' } }]);
  }
  child = (await store.fork({ tenant: 'alpha' }, root, CUT)).session.id;
});
afterAll(() => app?.close());

describe('GET /sessions/<id>/events', () => {
  it('serves a final page as the GraphQL events page, immutable, with a stable ETag', async () => {
    const res = await get(root, '?after=9&first=50');
    expect(res.status).toBe(200);
    expect(res.headers.get('cache-control')).toMatch(/\bimmutable\b/);
    expect(res.headers.get('cache-control')).toMatch(/\bmax-age=31536000\b/);
    expect(res.headers.get('vary')).toMatch(/authorization/i);
    const etag = res.headers.get('etag');
    expect(etag).toMatch(/^"[^"]+"$/);
    const body = await res.json();
    const viaGraphql = await app.gql(EVENTS, { id: root, after: 9, first: 50 }, A);
    expect(body).toEqual({ data: viaGraphql.data });
    expect(body.data.session.events.edges.map((e: any) => e.node.seq)).toEqual(Array.from({ length: 50 }, (_, i) => 10 + i));

    // Appends do not change a final page: same ETag, same body.
    await app.services.store.append(root, [{ type: 'plugin/test/note', data: { n: 1 } }]);
    const again = await get(root, '?after=9&first=50');
    expect(again.headers.get('etag')).toBe(etag);
    expect(await again.json()).toEqual(body);
  });

  it('answers a conditional GET with 304 and no body', async () => {
    const first = await get(root, '?after=49&first=100');
    const etag = first.headers.get('etag')!;
    const res = await get(root, '?after=49&first=100', { ...A, 'if-none-match': etag });
    expect(res.status).toBe(304);
    expect(res.headers.get('etag')).toBe(etag);
    expect(res.headers.get('cache-control')).toMatch(/\bimmutable\b/);
    expect(await res.text()).toBe('');
    // Another page's ETag does not match this one.
    const other = await get(root, '?after=50&first=100', { ...A, 'if-none-match': etag });
    expect(other.status).toBe(200);
    expect(other.headers.get('etag')).not.toBe(etag);
  });

  it('never marks a page that touches the head immutable', async () => {
    const count = (await app.gql('query($id: ID!) { session(id: $id) { eventCount } }', { id: root }, A)).data.session.eventCount;
    // The last full page (its last event is the log's last): no next page yet, so it may still change.
    for (const q of [`?after=${count - 51}&first=50`, `?after=${count - 20}&first=50`, `?after=${count - 1}`]) {
      const res = await get(root, q);
      expect(res.status).toBe(200);
      expect(res.headers.get('cache-control')).toBe('no-store');
      expect(res.headers.get('etag')).toBeNull();
      const body = await res.json();
      expect(body.data.session.events.pageInfo.hasNextPage).toBe(false);
    }
    // Even when asked conditionally with the ETag it would have once it is final.
    const later = await get(root, `?after=${count - 52}&first=50`);
    expect(later.headers.get('cache-control')).toMatch(/immutable/);
    const etag = later.headers.get('etag')!;
    const head = await get(root, `?after=${count - 51}&first=50`, { ...A, 'if-none-match': etag.replace(/\.-?\d+\.50"$/, `.${count - 51}.50"`) });
    expect(head.status).toBe(200);
    expect(head.headers.get('cache-control')).toBe('no-store');
  });

  it("gives another tenant 404, never the page, even with the page's ETag", async () => {
    const own = await get(root, '?after=9&first=50');
    const etag = own.headers.get('etag')!;
    for (const headers of [B, { ...B, 'if-none-match': etag }]) {
      const res = await get(root, '?after=9&first=50', headers);
      expect(res.status).toBe(404);
      const body = await res.json();
      expect(body.errors[0].extensions.code).toBe('SESSION_NOT_FOUND');
      expect(JSON.stringify(body)).not.toContain('answer');
      expect(res.headers.get('cache-control')).toBe('no-store');
    }
    const anonymous = await get(root, '?after=9&first=50', {});
    expect(anonymous.status).toBe(401);
  });

  it("reads a fork's inherited prefix as GraphQL does, and pages across its cut", async () => {
    for (const after of [-1, 49, CUT - 30]) {
      const res = await get(child, `?after=${after}&first=50`);
      expect(res.status).toBe(200);
      const body = await res.json();
      const viaGraphql = await app.gql(EVENTS, { id: child, after, first: 50 }, A);
      expect(body).toEqual({ data: viaGraphql.data });
      const nodes = body.data.session.events.edges.map((e: any) => e.node);
      expect(nodes[0].seq).toBe(after + 1);
      expect(nodes.every((n: any) => n.sessionId === child)).toBe(true);
      // Below the cut the events are the parent's, read through the child.
      const parent = (await (await get(root, `?after=${after}&first=50`)).json()).data.session.events.edges.map((e: any) => e.node);
      for (const [i, n] of nodes.entries()) {
        if (n.seq > CUT) continue;
        expect(n.inherited).toBe(true);
        expect({ ...n, id: undefined, sessionId: undefined, inherited: undefined }).toEqual({
          ...parent[i],
          id: undefined,
          sessionId: undefined,
          inherited: undefined,
        });
      }
    }
  });

  it('refuses malformed pages and other methods', async () => {
    for (const q of ['?after=x', '?first=0', '?first=501', '?after=-2', '?after=1&token=abc']) {
      const res = await get(root, q);
      expect(res.status, q).toBe(400);
      expect((await res.json()).errors[0].extensions.code).toBe('BAD_USER_INPUT');
    }
    const post = await fetch(pageUrl(root, ''), { method: 'POST', headers: A });
    expect(post.status).toBe(405);
  });

  it("is the typed client's eventPage: final pages say so, another tenant's session is SESSION_NOT_FOUND", async () => {
    const client = createForklineClient({ url: app.url, token: TOKEN_A, retryForMs: 0 });
    const page = await client.eventPage(root, { after: 19, first: 20 });
    expect(page.final).toBe(true);
    expect(page.edges.map((e) => e.node.seq)).toEqual(Array.from({ length: 20 }, (_, i) => 20 + i));
    expect(page.edges[0].node).toMatchObject({ sessionId: root, inherited: false, type: expect.any(String) });
    const count = (await app.gql('query($id: ID!) { session(id: $id) { eventCount } }', { id: root }, A)).data.session.eventCount;
    const head = await client.eventPage(root, { after: count - 10 });
    expect(head.final).toBe(false);
    expect(head.edges).toHaveLength(9);
    const other = createForklineClient({ url: app.url, token: TOKEN_B, retryForMs: 0 });
    const refused = await other.eventPage(root).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(ForklineClientError);
    expect((refused as ForklineClientError).code).toBe('SESSION_NOT_FOUND');
  });
});
