// Session.totals and Session.turns(last:): the totals
// equal the sums over Session.turns and their steps, in a parent and in a
// fork cut mid-turn (inherited turns included, the forked turn ending at the
// cut); turns(last: N) are the last N of Session.turns.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';

let app: TestApp;
beforeAll(async () => {
  app = await startTestApp();
});
afterAll(() => app?.close());

const send = (sessionId: string, text: string) => app.ok('mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }', { i: { sessionId, text } });
const TURN = 'turn input reason startSeq endSeq durationMs usage { inputTokens outputTokens } steps { toolCallCount }';
const Q = `query($id: ID!) { session(id: $id) { turnCount
  totals { turns endedTurns steps toolCalls inputTokens outputTokens turnMs }
  turns { ${TURN} } last2: turns(last: 2) { ${TURN} } } }`;

/** What the totals should be, summed from Session.turns. */
function summed(turns: any[]) {
  const steps = turns.flatMap((t) => t.steps);
  return {
    turns: turns.length,
    endedTurns: turns.filter((t) => t.endSeq !== null).length,
    steps: steps.length,
    toolCalls: steps.reduce((n: number, s: any) => n + s.toolCallCount, 0),
    inputTokens: turns.reduce((n: number, t: any) => n + (t.usage?.inputTokens ?? 0), 0),
    outputTokens: turns.reduce((n: number, t: any) => n + (t.usage?.outputTokens ?? 0), 0),
    turnMs: turns.reduce((n: number, t: any) => n + (t.durationMs ?? 0), 0),
  };
}

describe('Session.totals and turns(last:)', () => {
  it('sums turns, steps, tool calls, tokens and time; the last N turns are those of the whole list', async () => {
    const { createSession } = await app.ok('mutation { createSession(input: { title: "totals" }) { id } }');
    const id = createSession.id;
    await send(id, 'first\n!call clock\n!then\n!call clock');
    await app.services.host.idle();
    await send(id, 'second one here');
    await app.services.host.idle();
    await send(id, 'third\n!call sleep {"ms": 50}');
    await app.services.host.idle();
    const { session } = await app.ok(Q, { id });
    expect(session.turns).toHaveLength(3);
    expect(session.totals).toEqual(summed(session.turns));
    expect(session.totals.toolCalls).toBe(3);
    expect(session.totals.inputTokens).toBeGreaterThan(0);
    expect(session.last2).toEqual(session.turns.slice(-2));

    // A fork cut inside turn 3's first step: turns 1–2 inherited, turn 3 forked at the cut.
    const events = (await app.services.store.log.page(id, -1, 200)).filter((e) => e.type === 'tool/result');
    const cut = events.at(-1)!.seq;
    const { forkSession } = await app.ok('mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id } } }', { i: { sessionId: id, atSeq: cut } });
    const { session: child } = await app.ok(Q, { id: forkSession.session.id });
    expect(child.turns.map((t: any) => t.reason)).toEqual(['completed', 'completed', 'forked']);
    expect(child.totals).toEqual(summed(child.turns));
    expect(child.last2).toEqual(child.turns.slice(-2));

    const bad = await app.gql('query($id: ID!) { session(id: $id) { turns(last: 0) { turn } } }', { id });
    expect(bad.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
  });
});
