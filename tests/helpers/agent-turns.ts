// Running scripted turns in a test app and reading what they left: a new
// session, a message answered to the end, the log and the tool results.
import type { TestApp } from './app.ts';
import { anyData } from './event-data.ts';

export function agentTurns(app: () => TestApp, title: string) {
  const log = (id: string) => app().services.store.log.page(id, -1, 10_000);
  return {
    /** A new session, of `model` when given (else the default model). */
    create: async (model?: { provider: string; model: string }) =>
      (await app().ok(`mutation($t: String, $m: ModelConfigInput) { createSession(input: { title: $t, model: $m }) { id } }`, { t: title, m: model }))
        .createSession.id as string,
    /** Sends `text` and waits until every agent of the process is idle. */
    turn: async (sessionId: string, text: string) => {
      await app().ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId, text } });
      await app().services.host.idle();
    },
    log,
    /** The last `n` events as [type, their reason, message or text]. */
    tail: async (id: string, n: number) => (await log(id)).slice(-n).map((e) => [e.type, anyData(e).reason ?? anyData(e).message ?? anyData(e).text]),
    /** [tool name, status, content] of each tool/result, in order. */
    results: async (id: string) => (await log(id)).filter((e) => e.type === 'tool/result').map((e) => [anyData(e).name, anyData(e).status, anyData(e).content]),
  };
}
