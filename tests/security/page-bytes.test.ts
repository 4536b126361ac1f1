// A page of events is held to bytes as well as to a count (docs/operations.md
// "Memory and time"): an event can be megabytes (a recording's line is up to
// 16 MiB), so `events(first: 500)` could make the process read gigabytes for
// one request. Pages stop at FORKLINE_PAGE_BYTES of data, plus the one event
// that passes it, and say there is more; every reader that pages on from its
// last event (the connection both ways, type filters, subscriptions' catch-up,
// the export) still gets every event exactly once, in order. An AG-UI run's
// MESSAGES_SNAPSHOT is the latest turns within the same bytes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { subscribe } from '../helpers/subscribe.ts';
import { HttpAgent } from '@ag-ui/client';
import { EventType, type BaseEvent } from '@ag-ui/core';

const PAGE_BYTES = 64 * 1024;
const BIG = 20_000; // characters of each answer: about three answers fill a page
const TURNS = 12;
let app: TestApp;
let sessionId: string;
let eventCount: number;

beforeAll(async () => {
  app = await startTestApp({ pageBytes: PAGE_BYTES });
  const lines: unknown[] = [{ format: 'forkline.recording', version: 4, session: { id: 'ses_pages', title: 'pages' } }];
  let seq = 0;
  const add = (type: string, data: unknown) => lines.push({ seq: seq++, type, data });
  for (let turn = 1; turn <= TURNS; turn++) {
    add('inbox/add', { text: `question ${turn}`, inputId: `in_${turn}` });
    add('inbox/remove', { reason: 'taken', inputId: `in_${turn}` });
    add('turn/start', { turn, inputId: `in_${turn}` });
    add('step/start', { step: 1, turn });
    add('model/message', { step: 1, turn, text: `${turn} `.padEnd(BIG, 'x'), toolCalls: [] });
    add('step/end', { step: 1, turn, reason: 'completed' });
    add('turn/end', { turn, reason: 'completed' });
  }
  eventCount = seq;
  const body = lines.map((l) => JSON.stringify(l)).join('\n') + '\n';
  const res = await fetch(app.url.replace(/\/graphql$/, '/recordings'), { method: 'POST', headers: { 'content-type': 'application/x-ndjson' }, body });
  expect(res.status).toBe(201);
  sessionId = ((await res.json()) as any).session.id;
});
afterAll(() => app?.close());

// A page's data is what the budget holds: a page that does not select it reads none (tests/graphql/event-page-shape.test.ts).
const PAGE = `pageInfo { hasNextPage hasPreviousPage startCursor endCursor } edges { node { seq type data } }`;
const all = Array.from({ length: TURNS * 7 }, (_, i) => i);

describe('a page of events is held to FORKLINE_PAGE_BYTES', () => {
  it('forward: a page of 500 stops after the bytes, says there is more, and paging on reads every event once', async () => {
    const seen: number[] = [];
    let after: string | null = null;
    let pages = 0;
    for (;;) {
      const d: any = await app.ok(`query($id: ID!, $after: String) { session(id: $id) { events(first: 500, after: $after) { ${PAGE} } } }`, {
        id: sessionId,
        after,
      });
      const page = d.session.events;
      pages++;
      const bigOnes = page.edges.filter((e: any) => e.node.type === 'model/message').length;
      expect(bigOnes).toBeLessThanOrEqual(Math.ceil(PAGE_BYTES / BIG) + 1); // the budget, plus the event that passes it
      seen.push(...page.edges.map((e: any) => e.node.seq));
      // The large events' data is read apart from the page's statement: it arrives whole.
      for (const { node } of page.edges) {
        if (node.type === 'model/message') expect(node.data.text).toBe(`${(node.seq - 4) / 7 + 1} `.padEnd(BIG, 'x'));
        if (node.type === 'inbox/add') expect(node.data.text).toBe(`question ${(node.seq + 7) / 7}`);
      }
      if (!page.pageInfo.hasNextPage) break;
      after = page.pageInfo.endCursor;
    }
    expect(seen).toEqual(all);
    expect(pages).toBeGreaterThanOrEqual(3);
  });

  it('backward: `last` keeps the newest events and paging back reads every event once', async () => {
    const seen: number[] = [];
    let before: string | null = null;
    for (;;) {
      const d: any = await app.ok(`query($id: ID!, $before: String) { session(id: $id) { events(last: 500, before: $before) { ${PAGE} } } }`, {
        id: sessionId,
        before,
      });
      const page = d.session.events;
      if (before === null) expect(page.edges.at(-1).node.seq).toBe(eventCount - 1);
      expect(page.edges.filter((e: any) => e.node.type === 'model/message').length).toBeLessThanOrEqual(Math.ceil(PAGE_BYTES / BIG) + 1);
      seen.unshift(...page.edges.map((e: any) => e.node.seq));
      if (!page.pageInfo.hasPreviousPage) break;
      before = page.pageInfo.startCursor;
    }
    expect(seen).toEqual(all);
  });

  it('a type filter pages the same way, forward and backward', async () => {
    const answers = all.filter((s) => s % 7 === 4);
    for (const backward of [false, true]) {
      const seen: number[] = [];
      let cursor: string | null = null;
      for (;;) {
        const args = backward ? 'last: 500, before: $c' : 'first: 500, after: $c';
        const d: any = await app.ok(`query($id: ID!, $c: String) { session(id: $id) { events(${args}, types: ["model/message"]) { ${PAGE} } } }`, {
          id: sessionId,
          c: cursor,
        });
        const page = d.session.events;
        expect(page.edges.length).toBeLessThan(answers.length);
        const seqs = page.edges.map((e: any) => e.node.seq);
        if (backward) seen.unshift(...seqs);
        else seen.push(...seqs);
        if (!(backward ? page.pageInfo.hasPreviousPage : page.pageInfo.hasNextPage)) break;
        cursor = backward ? page.pageInfo.startCursor : page.pageInfo.endCursor;
      }
      expect(seen).toEqual(answers);
    }
  });

  it.each(['ws', 'sse'] as const)('sessionEvents over %s catches up through pages cut by bytes: every event once, in order', async (transport) => {
    const sub = subscribe<{ sessionEvents: { seq: number } }>(
      transport,
      app.url,
      'subscription($id: ID!) { sessionEvents(sessionId: $id, afterSeq: -1) { seq } }',
      {
        id: sessionId,
      },
    );
    try {
      const items = await sub.count(eventCount);
      expect(items.map((i) => i.sessionEvents.seq)).toEqual(all);
    } finally {
      await sub.close();
    }
  });

  it('GET /sessions/<id>/events holds a page to the bytes too: a short page with a next one, not cached as final', async () => {
    const seen: number[] = [];
    let after = -1;
    for (;;) {
      const res = await fetch(new URL(`/sessions/${sessionId}/events?after=${after}&first=500`, app.url));
      expect(res.status).toBe(200);
      const page = ((await res.json()) as any).data.session.events;
      expect(page.edges.filter((e: any) => e.node.type === 'model/message').length).toBeLessThanOrEqual(Math.ceil(PAGE_BYTES / BIG) + 1);
      if (page.pageInfo.hasNextPage) expect(res.headers.get('cache-control')).toBe('no-store');
      seen.push(...page.edges.map((e: any) => e.node.seq));
      if (!page.pageInfo.hasNextPage) break;
      after = Number(page.pageInfo.endCursor);
    }
    expect(seen).toEqual(all);
  });

  it('the export (GET /recordings) streams every event', async () => {
    const res = await fetch(`${app.url.replace(/\/graphql$/, '/recordings')}?session=${sessionId}`);
    expect(res.status).toBe(200);
    const events = (await res.text())
      .split('\n')
      .filter(Boolean)
      .slice(1)
      .map((l) => JSON.parse(l))
      .filter((l) => typeof l.seq === 'number');
    expect(events.map((e) => e.seq)).toEqual(all);
  });

  it("an AG-UI run's MESSAGES_SNAPSHOT holds the latest turns within the bytes, from a turn's question", async () => {
    const agent = new HttpAgent({ url: app.url.replace(/\/graphql$/, '/agui'), threadId: sessionId });
    agent.addMessage({ id: 'u-1', role: 'user', content: 'one more' });
    const events: BaseEvent[] = [];
    await agent.runAgent({ runId: 'run-page-bytes' }, { onEvent: ({ event }) => void events.push(event) });
    const snapshot = events.find((e) => e.type === EventType.MESSAGES_SNAPSHOT) as any;
    const answers = snapshot.messages.filter((m: any) => m.role === 'assistant');
    expect(answers.length).toBeGreaterThan(0);
    expect(answers.length).toBeLessThanOrEqual(Math.ceil(PAGE_BYTES / BIG) + 1);
    expect(snapshot.messages[0]).toMatchObject({ role: 'user', content: expect.stringMatching(/^question \d+$/) });
    // The newest turns: the last answer before the run's own message is turn 12's.
    expect(String(answers.at(-1).content).startsWith(`${TURNS} `)).toBe(true);
    expect(events.at(-1)?.type).toBe(EventType.RUN_FINISHED);
  });
});
