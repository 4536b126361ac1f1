// What the call-id tests of the runner SDKs share (docs/runners.md#call-ids):
// a model's answer making several calls at once, in each provider's streamed
// wire format, the call ids a request sent, a runner pool's session read
// back from the store, and one file's set-up of an app and a fake provider
// answering from a script.
import { afterAll, beforeAll } from 'vitest';
import { anyData } from './event-data.ts';
import { anthropicStart, anthropicStop, chatChunk, sse } from './provider-sse.ts';
import { answers, refusingProviders, type Provider } from './provider-rules.ts';
import { agentsResponse, agentsResponseText } from './wire-name-sessions.ts';
import { tool } from '@openai/agents';
import { z } from 'zod';
import { ForklineRunner, type RunnerSession } from '@forkline/runner';
import { startTestApp, type TestApp } from './app.ts';

export type Call = { id: string; name: string; arguments: string };

/** One answer as the provider streams it (the fake makes Anthropic's JSON message of it): these calls at once, or text. */
export function answerOf(provider: Provider, a: Call[] | string): string[] {
  if (typeof a === 'string') return provider === 'openai-responses' ? agentsResponseText(a) : answers[provider].text(a);
  if (provider === 'openai-responses')
    return agentsResponse(
      ...a.map((c, i) => ({ type: 'function_call', id: `fc_${i}`, call_id: c.id, name: c.name, arguments: c.arguments, status: 'completed' })),
    );
  if (provider === 'anthropic')
    return [
      anthropicStart(),
      ...a.flatMap((c, index) => [
        sse({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: c.id, name: c.name, input: {} } }, 'content_block_start'),
        sse({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: c.arguments } }, 'content_block_delta'),
        sse({ type: 'content_block_stop', index }, 'content_block_stop'),
      ]),
      ...anthropicStop('tool_use', 3),
    ];
  const calls = a.map((c, i) => ({ index: i, id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } }));
  return [
    sse(chatChunk({ role: 'assistant', tool_calls: calls })),
    sse(chatChunk({}, 'tool_calls', { usage: { prompt_tokens: 5, completion_tokens: 1, total_tokens: 6 } })),
    sse('[DONE]'),
  ];
}

/** The call ids a request sent (its history's calls), in order. */
export const sentCallIds = (provider: Provider, body: any): string[] =>
  provider === 'openai-responses'
    ? body.input.filter((i: any) => i.type === 'function_call').map((i: any) => i.call_id)
    : provider === 'anthropic'
      ? body.messages.flatMap((m: any) => (Array.isArray(m.content) ? m.content : []).filter((p: any) => p.type === 'tool_use').map((p: any) => p.id))
      : body.messages.flatMap((m: any) => (m.tool_calls ?? []).map((c: any) => c.id));

/** Sessions of runner pools of their own (`<prefix>-<n>`), each with a message waiting, and their logs as the store holds them. */
export function runnerSessions(app: () => TestApp, prefix: string) {
  let pools = 0;
  const send = (id: string, text: string) => app().ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
  const logOf = async (id: string) => (await app().services.store.log.page(id, -1, 1000)).map((e) => ({ type: e.type, data: anyData(e) }));
  type Log = Awaited<ReturnType<typeof logOf>>;
  return {
    send,
    logOf,
    async session(text: string) {
      const pool = `${prefix}-${++pools}`;
      const id = (await app().ok(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id as string;
      await send(id, text);
      return { id, pool };
    },
    /** The data of each model/message. */
    messages: (log: Log) => log.filter((e) => e.type === 'model/message').map((e) => e.data),
    /** Each result's call, status and content. */
    results: (log: Log) => log.filter((e) => e.type === 'tool/result').map((e) => ({ callId: e.data.callId, status: e.data.status, content: e.data.content })),
    /** The call ids of the history Session.modelRequest sends now. */
    async requestIds(id: string): Promise<string[]> {
      const request = await app().ok(`query($id: ID!) { session(id: $id) { modelRequest { messages } } }`, { id });
      return (request.session.modelRequest.messages as any[]).flatMap((m) => (m.tool_calls ?? []).map((c: any) => c.id));
    },
  };
}

/** A call of the tests' `lookup` tool (arguments `{key}`). */
export const look = (id: string, key: string): Call => ({ id, name: 'lookup', arguments: JSON.stringify({ key }) });

/** The tests' `lookup` as an Agents SDK function tool: each key it looks up goes to `held.ran` (read when it runs). */
export const agentsLookup = (held: { ran: string[] }) =>
  tool({
    name: 'lookup',
    description: 'looks a key up',
    parameters: z.object({ key: z.string() }),
    execute: async ({ key }) => (held.ran.push(key), `value of ${key}`),
  });

/**
 * One file's set-up: an app and a fake provider that refuses what the real API refuses (refusingProviders), started
 * before the file's tests and closed after; the provider answers each request it takes with the next answer of
 * `script` (those calls at once, else that text; "done" once it runs out). With the sessions of runner pools
 * `<prefix>-<n>` (runnerSessions), and `ran`: what the tests' tools record they ran.
 */
export function useScriptedProvider(prefix: string) {
  const held = { script: [] as Array<Call[] | string>, ran: [] as string[] } as {
    app: TestApp;
    fake: Awaited<ReturnType<typeof refusingProviders>>;
    /** What the fake model answers, one a request the provider takes: each answer's calls, else its text. */
    script: Array<Call[] | string>;
    ran: string[];
  };
  beforeAll(async () => {
    held.fake = await refusingProviders((provider) => answerOf(provider, held.script.shift() ?? 'done'));
    held.app = await startTestApp();
  }, 60_000);
  afterAll(async () => {
    await held.app?.close();
    await held.fake?.close();
  });
  return {
    held,
    ...runnerSessions(() => held.app, prefix),
    /** Serves the session once with `work`, on a runner of its own. */
    async serve(s: { id: string; pool: string }, work: (session: RunnerSession) => Promise<unknown>) {
      const runner = new ForklineRunner({ url: held.app.url, pool: s.pool });
      try {
        await runner.serve(s.id, (session) => work(session).then(() => {}));
      } finally {
        await runner.close();
      }
    },
    /** The provider's requests since `from`: each one's refusal (none: taken) and the call ids it sent. */
    requestsSince: (from: number) => held.fake.received.slice(from).map((r) => ({ refusal: r.refusal, ids: sentCallIds(r.provider, r.body) })),
  };
}
