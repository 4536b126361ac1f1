// Running scripted turns in a test app and reading what they left: a new
// session, a message answered to the end, the log and the tool results.
import type { TestApp } from './app.ts';
import { anyData } from './event-data.ts';

export function agentTurns(app: () => TestApp, title: string) {
  const log = (id: string) => app().services.store.log.page(id, -1, 10_000);
  return {
    create: async () => (await app().ok(`mutation($t: String) { createSession(input: { title: $t }) { id } }`, { t: title })).createSession.id as string,
    /** Sends `text` and waits until every agent of the process is idle. */
    turn: async (sessionId: string, text: string) => {
      await app().ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId, text } });
      await app().services.host.idle();
    },
    log,
    /** [tool name, status, content] of each tool/result, in order. */
    results: async (id: string) => (await log(id)).filter((e) => e.type === 'tool/result').map((e) => [anyData(e).name, anyData(e).status, anyData(e).content]),
  };
}
