// Compaction: manual (compactSession), automatic (before a step
// over the budget), what the model is sent after it, and a cold fold that
// starts from the last compaction instead of seq 0.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { DIGEST_MAX_CHARS } from '../../src/agent/compaction.ts';
import { SessionFold } from '../../src/agent/session-fold.ts';
import { contextWindowOf, estimateRequestTokens } from '../../src/agent/context-budget.ts';
import { runCli } from '../helpers/cli.ts';

let app: TestApp;

beforeAll(async () => {
  app = await startTestApp({ budget: { defaultContextTokens: 4000, compactAt: 0.8 } });
});
afterAll(async () => {
  await app.close();
});

const create = async (model?: Record<string, unknown>) =>
  (await app.ok(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, { i: { title: 'c', ...(model ? { model } : {}) } })).createSession
    .id as string;
const send = async (sessionId: string, text: string) =>
  (await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId, text } })).sendMessage;
const log = async (id: string) => app.services.store.log.page(id, -1, 100_000);
const idle = () => app.services.host.idle();
const COMPACT = `mutation($i: CompactSessionInput!) { compactSession(input: $i) { fromSeq toSeq summarySeq tokensBefore tokensAfter session { id eventCount status } } }`;
const lastRequest = () => app.models.scripted.lastRequest!;

describe('context budget', () => {
  it('knows well-known windows, takes contextTokens first, else the default', () => {
    expect(contextWindowOf({ provider: 'openai', model: 'gpt-4o-mini' })).toBe(128_000);
    expect(contextWindowOf({ provider: 'anthropic', model: 'claude-sonnet-4-5' })).toBe(200_000);
    expect(contextWindowOf({ provider: 'google', model: 'models/gemini-2.0-flash' })).toBe(1_048_576);
    expect(contextWindowOf({ provider: 'openai', model: 'gpt-4o', contextTokens: 5000 })).toBe(5000);
    expect(contextWindowOf({ provider: 'openai-compatible', model: 'my-model' }, { defaultContextTokens: 9000 })).toBe(9000);
  });

  it('estimates a request from the provider count of the last step plus the new text, never below the characters', () => {
    const msgs = [
      { role: 'user' as const, content: 'x'.repeat(400) },
      { role: 'assistant' as const, content: 'y'.repeat(400) },
    ];
    expect(estimateRequestTokens(msgs, [])).toBe(100 + 100 + 8);
    expect(estimateRequestTokens(msgs, [], { tokens: 1000, messageCount: 1 })).toBe(1000 + 100 + 4);
    expect(estimateRequestTokens(msgs, [], { tokens: 1, messageCount: 1 })).toBe(208);
  });

  it('session/model carries contextTokens', async () => {
    const id = await create({ provider: 'scripted', model: 'scripted', contextTokens: 50_000 });
    const model = (await log(id)).find((e) => e.type === 'session/model');
    expect(model?.data).toEqual({ provider: 'scripted', model: 'scripted', contextTokens: 50_000 });
  });
});

describe('manual compaction', () => {
  it('writes start, the summary as surface/replace and end; the next request holds the summary, not the history', async () => {
    const id = await create();
    for (const t of ['first question about apples', 'second about pears', 'third about plums']) await send(id, t);
    await idle();
    const before = await log(id);
    const lastTurnEnd = before.findLast((e) => e.type === 'turn/end')!.seq;
    const r = (await app.ok(COMPACT, { i: { sessionId: id, instructions: 'keep the fruit' } })).compactSession;
    expect(r).toMatchObject({ fromSeq: 0, toSeq: lastTurnEnd, summarySeq: lastTurnEnd + 2, session: { id, status: 'IDLE' } });
    const after = (await log(id)).slice(before.length);
    expect(after.map((e) => e.type)).toEqual(['plugin/compaction/start', 'surface/replace', 'plugin/compaction/end']);
    expect(after[0].data).toMatchObject({ reason: 'manual', fromSeq: 0, toSeq: lastTurnEnd, instructions: 'keep the fruit' });
    // The instructions reach the summariser's prompt.
    expect(lastRequest().messages[0].content).toContain('\nInstructions: keep the fruit\n');
    const summary = (after[1].data as { content: string }).content;
    // What it saved, estimated as the budget estimates (context-budget.ts): recorded on the end and answered.
    const history = new SessionFold(id);
    history.apply(before);
    const tokensBefore = estimateRequestTokens(history.conversation.messagesThrough(lastTurnEnd), []);
    const tokensAfter = estimateRequestTokens([{ role: 'system', content: `Summary of earlier conversation (events 0..${lastTurnEnd}):\n${summary}` }], []);
    expect(after[2].data).toEqual({ fromSeq: 0, toSeq: lastTurnEnd, summarySeq: r.summarySeq, reason: 'manual', requests: 1, tokensBefore, tokensAfter });
    expect(r).toMatchObject({ tokensBefore, tokensAfter });
    expect(tokensBefore).toBeGreaterThan(0);
    expect(summary).toMatch(/^Digest of 3 user, 3 assistant and 0 tool messages\./);
    expect(summary).toContain('first question about apples');

    await send(id, 'fourth');
    await idle();
    const messages = lastRequest().messages;
    expect(messages).toEqual([
      { role: 'system', content: `Summary of earlier conversation (events 0..${lastTurnEnd}):\n${summary}` },
      { role: 'user', content: 'fourth' },
    ]);
  });

  it('the scripted summary is deterministic and bounded whatever the history', async () => {
    const id = await create();
    for (let i = 0; i < 30; i++) await send(id, `message ${i} ${'long words '.repeat(200)}`);
    await idle();
    const a = (await app.ok(COMPACT, { i: { sessionId: id } })).compactSession;
    const summary = ((await log(id))[a.summarySeq].data as { content: string }).content;
    expect(summary.length).toBeLessThanOrEqual(DIGEST_MAX_CHARS);
    const b = (await app.ok(COMPACT, { i: { sessionId: id, throughSeq: a.toSeq } })).compactSession;
    const again = ((await log(id))[b.summarySeq].data as { content: string }).content;
    expect(again.length).toBeLessThanOrEqual(DIGEST_MAX_CHARS);
  });

  it('throughSeq names an event; a session with no completed turn has nothing to compact', async () => {
    const id = await create();
    const none = await app.gql(COMPACT, { i: { sessionId: id } });
    expect(none.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    await send(id, 'hi');
    await idle();
    const far = await app.gql(COMPACT, { i: { sessionId: id, throughSeq: 999 } });
    expect(far.errors?.[0].extensions?.code).toBe('SEQ_OUT_OF_RANGE');
    const unknown = await app.gql(COMPACT, { i: { sessionId: 'ses_nope' } });
    expect(unknown.errors?.[0].extensions?.code).toBe('SESSION_NOT_FOUND');
  });

  it('waits for a running turn, never writes inside it', async () => {
    const id = await create();
    await send(id, 'first');
    await idle();
    await send(id, 'slow one\n!slow 30\nsome words to stream slowly here');
    const r = (await app.ok(COMPACT, { i: { sessionId: id } })).compactSession;
    await idle();
    const events = await log(id);
    const start = events.findIndex((e) => e.type === 'plugin/compaction/start');
    const turnEnds = events.filter((e) => e.type === 'turn/end').map((e) => e.seq);
    expect(turnEnds).toHaveLength(2);
    expect(start).toBeGreaterThan(turnEnds[1]);
    expect(r.toSeq).toBe(turnEnds[1]);
  });
});

describe('automatic compaction', () => {
  it('compacts before a step whose request would exceed the budget; the request sent fits', async () => {
    const id = await create(); // the default window here: 4000 tokens, compacted at 3200
    for (let i = 0; i < 12; i++) await send(id, `turn ${i} ${'padding text '.repeat(100)}`);
    await idle();
    const events = await log(id);
    const ends = events.filter((e) => e.type === 'plugin/compaction/end');
    expect(ends.length).toBeGreaterThan(0);
    expect(ends.every((e) => (e.data as { reason: string }).reason === 'automatic')).toBe(true);
    // Every turn answered, and every request the model was sent fits the budget.
    expect(events.filter((e) => e.type === 'turn/end').every((e) => (e.data as { reason: string }).reason === 'completed')).toBe(true);
    for (const r of app.models.scripted.recentRequests) expect(estimateRequestTokens(r.messages, r.tools)).toBeLessThanOrEqual(4000);
    // Compaction happens between turns: its events never sit inside a turn started on the first step.
    const starts = events.filter((e) => e.type === 'plugin/compaction/start').map((e) => e.seq);
    for (const s of starts) expect(events[s - 1].type).not.toBe('turn/start');
  });

  it('a request that does not fit even after compaction fails its turn with a clear reason', async () => {
    const id = await create();
    await send(id, 'x '.repeat(9000));
    await idle();
    const events = await log(id);
    const error = events.find((e) => e.type === 'plugin/agent/error');
    expect((error?.data as { message: string }).message).toMatch(/does not fit the context window of scripted:scripted \(4000 tokens\) even after compaction/);
    expect(events.at(-1)?.data).toMatchObject({ reason: 'failed' });
  });
});

describe('cold start', () => {
  it('a fresh fold starts from the last compaction, and builds the same request as a replay from seq 0', async () => {
    const id = await create();
    for (let i = 0; i < 5; i++) await send(id, `q${i}`);
    await idle();
    await app.ok(COMPACT, { i: { sessionId: id } });
    await send(id, 'after');
    await idle();
    const cold = new SessionFold(id);
    const from = await cold.coldStart(app.services.store);
    expect(from).toBeGreaterThan(10);
    const read = await cold.catchUp(app.services.store.log);
    const full = new SessionFold(id);
    const all = await full.catchUp(app.services.store.log);
    expect(read).toBe(all - from - 1);
    expect(cold.conversation.messages()).toEqual(full.conversation.messages());
    expect(cold.state.pendingInputs).toEqual(full.state.pendingInputs);
    expect(cold.state.lastTurn).toBe(full.state.lastTurn);
    expect(cold.lastTurnEndSeq).toBe(full.lastTurnEndSeq);
  });
});

describe('cold start in a fresh process', () => {
  it('the first turn on a long compacted session reads from the last compaction, not from seq 0', async () => {
    const { id } = await app.services.store.createSession({ tenant: 'local' }, { title: 'long' });
    for (let b = 0; b < 4; b++) {
      const batch = [];
      for (let t = b * 500 + 1; t <= (b + 1) * 500; t++) {
        batch.push(
          { type: 'inbox/add', data: { inputId: `in_${t}`, text: `q${t}` } },
          { type: 'inbox/remove', data: { inputId: `in_${t}`, reason: 'taken' } },
          { type: 'turn/start', data: { turn: t, inputId: `in_${t}` } },
          { type: 'step/start', data: { turn: t, step: 1 } },
          { type: 'model/message', data: { turn: t, step: 1, text: `a${t}`, toolCalls: [] } },
          { type: 'step/end', data: { turn: t, step: 1, reason: 'completed' } },
          { type: 'turn/end', data: { turn: t, reason: 'completed' } },
        );
      }
      await app.services.store.append(id, batch);
    }
    const compacted = (await app.ok(COMPACT, { i: { sessionId: id } })).compactSession;
    expect(compacted.toSeq).toBe(14_000);
    // Another process, with no fold of the session: count the event rows its first turn reads.
    let rows = 0;
    const fresh = await startTestApp({
      databaseUrl: app.db.url,
      onQuery: (sql, n) => {
        if (/FROM "Event"/.test(sql)) rows += n;
      },
    });
    try {
      await fresh.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text: 'and now?' } });
      await fresh.services.host.idle();
      expect(rows).toBeLessThan(6_000); // the first page, then the compaction's range is skipped: not 14,000
      const request = fresh.models.scripted.lastRequest!;
      expect(request.messages.map((m) => m.role)).toEqual(['system', 'user']);
      expect(request.messages[1]).toEqual({ role: 'user', content: 'and now?' });
      const events = await fresh.services.store.log.page(id, compacted.summarySeq, 100);
      expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { turn: 2001, reason: 'completed' } });
    } finally {
      await fresh.close();
    }
  }, 120_000);
});

describe('forkline compact', () => {
  it('compacts through the last completed turn or --through, with --instructions', async () => {
    const id = await create();
    await send(id, 'one');
    await send(id, 'two');
    await idle();
    const r = await runCli(app.url, ['compact', id, '--through', '6', '--instructions', 'be brief']);
    expect(r.stderr).toBe('');
    expect(r.stdout).toBe(`compacted ${id}: seq 0-6 summarised at seq ${(await log(id)).length - 2}\n`);
    const j = await runCli(app.url, ['compact', id, '--json']);
    expect(JSON.parse(j.stdout)).toMatchObject({ fromSeq: 0, toSeq: 14, session: { id } });
    const bad = await runCli(app.url, ['compact', id, '--through', 'x']);
    expect(bad.code).toBe(2);
  });
});
