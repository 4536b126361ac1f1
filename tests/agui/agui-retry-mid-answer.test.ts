// A retried AG-UI run (the same runId, its first request's connection dropped)
// that comes while its turn's answer is streaming, read by @ag-ui/client's
// HttpAgent: the retry follows the turn from the log, and the answer that was
// already under way reaches it whole, once stored. Before, the retry showed
// the deltas it heard from the middle of the answer on, and then nothing of
// the stored answer (it did not continue what was shown): the end of the
// answer without its beginning.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpAgent } from '@ag-ui/client';
import { EventType, type BaseEvent } from '@ag-ui/core';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { waitFor } from '../helpers/wait.ts';
import { claimSession } from '../helpers/claimed-session.ts';
import { answerEvents, externalSession, publishDelta, toldByAgui, turnEnding } from '../helpers/step-answers.ts';

let app: TestApp;
let url: string;
beforeAll(async () => {
  app = await startTestApp();
  url = app.url.replace(/\/graphql$/, '/agui');
});
afterAll(() => app?.close());

describe('a retried AG-UI run that comes in the middle of an answer', () => {
  it('shows that answer whole when it is stored, not its end alone', async () => {
    const sid = await externalSession(app, 'retry mid-answer');
    const run = (events: BaseEvent[]) => {
      const agent = new HttpAgent({ url, threadId: sid });
      agent.addMessage({ id: 'u-retry', role: 'user', content: 'time?' });
      return { agent, running: agent.runAgent({ runId: 'run-retry' }, { onEvent: ({ event }) => void events.push(event) }) };
    };
    const first: BaseEvent[] = [];
    const firstRun = run(first);
    await waitFor(() => first.some((e) => e.type === EventType.RUN_STARTED), { what: 'the first request’s run started' });
    await waitFor(() => app.services.live.stats().turns === 1, { what: 'the first request’s relay subscription' });

    const { token, append } = await claimSession(app, sid, { startTurn: true });
    await publishDelta(app, sid, token, 'Let me ');
    await waitFor(() => toldByAgui(first) === 'Let me ', { what: 'the first request shown the answer’s beginning' });
    firstRun.agent.abortRun(); // its client's connection dropped
    await firstRun.running.catch(() => {});

    // The retry, while the answer is still streaming: it follows the turn from its start in the log.
    const retried: BaseEvent[] = [];
    const retry = run(retried);
    await waitFor(() => retried.some((e) => e.type === EventType.STEP_STARTED), { what: 'the retry read the step’s start' });
    await publishDelta(app, sid, token, 'look. ');
    await append([...answerEvents('Let me look. '), ...turnEnding()]);
    await retry.running;
    expect(retried.at(-1)?.type).toBe(EventType.RUN_FINISHED);
    // The old code: "look. " (the deltas it heard, then nothing of the stored answer, which did not continue them).
    expect(toldByAgui(retried)).toBe('Let me look. ');
    expect(retry.agent.messages.filter((m) => m.role === 'assistant').map((m) => m.content)).toEqual(['Let me look. ']);
  });
});
