// The AI SDK UI door (docs/api.md, "useChat"): `POST /chat` takes what
// useChat's DefaultChatTransport sends ({id, messages, trigger, messageId})
// and answers a UI message stream; `GET /chat/<id>/stream` resumes the answer
// in progress (204 when none). A chat is a forkline session: the id of one the
// caller owns, or any other id, which names a session of the caller's tenant
// made on first use. Regenerating an answer is edit-and-rerun (editMessage's
// cut): a child forked before the input, which becomes the chat's head, recorded in
// the chat's session as `plugin/chat/head` so every later request (and every
// process, after a restart) goes to it. Nothing is held per stream: a resumed
// stream is replayed from the log. The caller, Origin, body limit and caps are
// the guard's (http/guard.ts), as at every door.
import type http from 'node:http';
import { createHash, randomUUID } from 'node:crypto';
import { z } from 'zod';
import { ForklineError } from '../core/errors.ts';
import { dataOf } from '../core/core-event.ts';
import { idSchema, messageTextSchema, parseInput } from '../core/input-rules.ts';
import type { Caller } from '../core/api-tokens.ts';
import { awaitingApproval } from '../core/tool-approval.ts';
import type { Scope, SessionRow, TenantStore } from '../store/session-store.ts';
import { turnError, turnTotalsOf } from '../store/turn-reads.ts';
import { MAX_SEQ } from '../store/session-log.ts';
import { TextBudget } from '../core/text-budget.ts';
import type { DoorServices } from '../host/services.ts';
import type { Guard } from '../http/guard.ts';
import type { DoorStatements } from '../http/door-statements.ts';
import { StatementAbandonedError, StatementTimeoutError } from '../db/statement-deadlines.ts';
import { reply, replyError } from '../http/http-body.ts';
import { drained } from '../http/drained.ts';
import { checkEventBytes, EventTooLarge } from '../http/event-ceiling.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import type { TurnUpdate } from '../agent/turn-updates.ts';
import { chatRequestOf, type ApprovalResponse } from './chat-request.ts';
import { ChatAnswer, inputOfAnswer, type AnswerReader, type TurnInProgress, type UIChunk } from './ui-message-stream.ts';

/** Plugin event in a chat's session: the session that now answers the chat (after a regenerate). */
export const HEAD_EVENT = 'plugin/chat/head';
/** A HEAD_EVENT's branch (plugin data: checked, not assumed). */
const headOfChat = z.object({ sessionId: z.string() });
/** What an answer reads ahead of its turn updates for their calls' inputs and results: a page (one statement) of so many. */
const ANSWERS_PAGE = 200;
const ANSWER_TYPES = ['model/message', 'tool/result'];
/** What a failed turn's error part carries of its error report at most (the agent writes at most 10,000 characters). */
const ERROR_TEXT_CHARS = 10_000;

export interface ChatOptions {
  services: Pick<DoorServices, 'store' | 'controller' | 'live' | 'host'>;
  guard: Guard;
  log: (msg: string, err?: unknown) => void;
  /** A request's reads: within its scope (http/door-statements.ts), cancelled once its client leaves. */
  statements: DoorStatements;
}

/** A path segment's text, or undefined when its percent-encoding is not UTF-8 (`%E0%A4%A`, `%ZZ`). */
function decodedPathSegment(segment: string): string | undefined {
  try {
    return decodeURIComponent(segment);
  } catch {
    return undefined;
  }
}

/** The session a chat id that is not a session id names in a tenant: derived, so no table maps them. */
const chatSessionId = (tenant: string, chatId: string) => `ses_chat${createHash('sha256').update(`${tenant}\0${chatId}`).digest('hex').slice(0, 32)}`;

const STREAM_HEADERS = {
  'content-type': 'text/event-stream',
  'cache-control': 'no-cache, no-transform',
  'x-vercel-ai-ui-message-stream': 'v1',
  'x-accel-buffering': 'no',
};

export function chatHandler(opts: ChatOptions) {
  const { store: stores, controller, live, host } = opts.services;
  const { guard } = opts;
  const cors = (req: http.IncomingMessage) => guard.corsHeaders(req);
  /**
   * The tenant's store as the request `res` answers reads through it: each statement bounded on its own (an answer
   * streams for as long as its turn lasts), all of them cancelled once the client leaves (http/door-statements.ts).
   */
  const readsOf = (scope: Scope, res: http.ServerResponse) => {
    const statements = opts.statements(res, 'statement');
    return { store: stores.forTenant(scope).reading(statements), statements };
  };

  return async (req: http.IncomingMessage, res: http.ServerResponse, path: string): Promise<void> => {
    const resume = /^\/chat\/([^/]+)\/stream$/.exec(path);
    if (path !== '/chat' && !resume) return replyError(res, 404, 'BAD_USER_INPUT', 'POST /chat, or GET /chat/<id>/stream', cors(req));
    const method = resume ? 'GET' : 'POST';
    if (req.method === 'OPTIONS' && guard.originAllowed(req) && Object.keys(cors(req)).length) {
      res
        .writeHead(204, {
          ...cors(req),
          'access-control-allow-methods': method,
          'access-control-allow-headers': 'authorization, content-type, accept',
          'access-control-max-age': '600',
        })
        .end();
      return;
    }
    if (req.method !== method)
      return replyError(res, 405, 'BAD_USER_INPUT', resume ? 'GET /chat/<id>/stream resumes an answer' : 'POST a useChat request to /chat', {
        allow: method,
        ...cors(req),
      });
    const principal = guard.callerOf(req, res, cors(req));
    if (!principal) return;
    // An answer is held open like an SSE subscription (its tenant's and its token's caps): its place is taken before the
    // body is read or anything written, so a refused request sends no message and starts no turn.
    const capped = guard.openStream(req, res);
    if (capped) return replyError(res, capped.status, capped.code, capped.message, { ...capped.headers, ...cors(req) });
    const scope: Scope = { tenant: principal.tenant };
    try {
      if (resume) return await resumeAnswer(req, res, scope, resume[1]);
      return await answer(req, res, scope, principal);
    } catch (err) {
      if (err instanceof StatementAbandonedError) return; // its client has gone: nobody to answer
      if (res.headersSent) throw err;
      // As GraphQL reports it: the code, and the details (an append rule's `rule` and `seq`) beside it.
      if (err instanceof ForklineError)
        return reply(
          res,
          err.code === 'SESSION_NOT_FOUND' ? 404 : 400,
          { errors: [{ message: err.message, extensions: { code: err.code, ...err.details } }] },
          cors(req),
        );
      if (isDatabaseUnavailable(err))
        return replyError(res, 503, 'SERVICE_UNAVAILABLE', 'the database is unavailable; retry shortly', { 'retry-after': '1', ...cors(req) });
      if (err instanceof StatementTimeoutError) return replyError(res, 503, err.code, err.message, cors(req));
      throw err;
    }
  };

  /** POST /chat: send the new user message (or regenerate) and stream the answer. */
  async function answer(req: http.IncomingMessage, res: http.ServerResponse, scope: Scope, principal: Caller): Promise<void> {
    const { store } = readsOf(scope, res);
    const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (type !== 'application/json') return replyError(res, 415, 'BAD_USER_INPUT', 'send the chat request as application/json', cors(req));
    const input = await guard.readChatRequest(req, res, chatRequestOf, cors(req));
    if (!input) return;
    if (input.responses.length) return decideAndGoOn(req, res, scope, principal, input.chatId, input.responses);
    const { lastUser } = input;
    const text = lastUser?.text;
    if (input.trigger === 'submit-message') {
      if (!text) return replyError(res, 400, 'BAD_USER_INPUT', 'the last user message holds no text to send', cors(req));
      parseInput(messageTextSchema, text, 'the last user message');
    }

    const chat = await chatSession(scope, store, input.chatId, true);
    const head = await headOf(store, chat!);
    // The user message's id makes a retried request one send (idempotency key).
    const key = (session: SessionRow) => (lastUser?.id ? { key: `chat:${session.id}:${lastUser.id}` } : {});
    if (input.trigger === 'submit-message') return sendAndStream(req, res, scope, input.chatId, head, text!, key(head));
    // Edit-and-rerun of the answered input: the message named, else the head's last turn.
    const rerun = inputOfAnswer(input.messageId) ?? dataOf(await store.log.lastOfType(head.id, 'turn/start'), 'turn/start')?.inputId;
    if (!rerun) return replyError(res, 400, 'BAD_USER_INPUT', 'nothing to regenerate: the chat has no answered message', cors(req));
    const again = text || dataOf(await store.log.inboxAddOf(head.id, rerun), 'inbox/add')?.text;
    if (!again) return replyError(res, 400, 'BAD_USER_INPUT', `no input ${rerun} in the chat`, cors(req));
    parseInput(messageTextSchema, again, 'the regenerated message');
    // editMessage's cut, its message sent apart: the branch is listened to before anything is queued in it, as a new
    // message is (sendAndStream), so its turn cannot start before the answer's stream is attached. It becomes the
    // chat's head once its message is queued; a refused message (the inbox's bounds: the branch carries the inputs
    // waiting at its cut) takes the branch back, so a refused regenerate leaves the chat as it was.
    const fork = await controller.forkBeforeInput(scope, head.id, rerun);
    return sendAndStream(req, res, scope, input.chatId, fork.session, again, key(fork.session), {
      queued: async () => void (await store.append(chat!.id, [{ type: HEAD_EVENT, data: { sessionId: fork.session.id } }])),
      refused: async () => void (await controller.discardSession(scope, fork.session.id)),
    });
  }

  /** A branch made for a message (a regenerate): what becomes of it once the message is queued, or refused. */
  interface BranchMade {
    queued: () => Promise<void>;
    refused: () => Promise<void>;
  }

  /**
   * Sends `text` to `session` and streams its answer. Subscribed before the message is sent: its turn may start at
   * once, and a step that began before the subscription streams no text (its answer arrives whole once stored:
   * docs/api.md "Live turns").
   */
  async function sendAndStream(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    scope: Scope,
    chatId: string,
    session: SessionRow,
    text: string,
    idem: { key?: string },
    branch?: BranchMade,
  ): Promise<void> {
    host.prewarm(session.id, session.eventCount);
    const before = session.eventCount - 1;
    const early = await subscribe(scope, res, session.id, before);
    let sent: Awaited<ReturnType<typeof controller.sendMessage>>;
    try {
      sent = await controller.sendMessage(scope, session.id, text, idem);
    } catch (err) {
      await early.return?.();
      if (branch && err instanceof ForklineError) await branch.refused();
      throw err;
    }
    await branch?.queued();
    const meta = { chatId, sessionId: session.id, inputId: sent.inputId };
    if (sent.event.seq > before) return stream(res, req, scope, meta, early);
    // A retried send names its earlier input: its answer is followed from there, as a resumed one is.
    await early.return?.();
    return stream(res, req, scope, meta, sent.event.seq);
  }

  /**
   * POST /chat answering a tool approval (the AI SDK's addToolApprovalResponse:
   * a tool part `approval-responded` whose approval id is the call's id): each
   * decision is approveToolCall's or denyToolCall's (its rules and errors, `by`
   * the caller), then the answer goes on from the decision, in the same message.
   */
  async function decideAndGoOn(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    scope: Scope,
    caller: Caller,
    chatId: string,
    responses: ApprovalResponse[],
  ): Promise<void> {
    const { store } = readsOf(scope, res);
    const chat = await chatSession(scope, store, chatId, false);
    if (!chat) throw new ForklineError('SESSION_NOT_FOUND', `no chat ${chatId}: nothing awaits approval there`);
    const head = await headOf(store, chat);
    // Read before deciding: once decided, the turn may go on and end at once.
    const tail = await store.log.openTailFolded(head.id, head.eventCount - 1);
    const { open } = tail;
    const turnStart = dataOf(tail.turnStart, 'turn/start');
    // Every response is checked before any is recorded, and all are recorded in one append: a refused POST decides nothing
    // (a call answered twice breaks the log's `approval pairing` rule at its second decision).
    // (Their ids and reasons were held to the input rules with the request: chat-request.ts.)
    const decisions = responses.map((r) => ({
      callId: r.callId,
      decision: r.approved ? ('approved' as const) : ('denied' as const),
      reason: r.reason ?? '',
      by: caller.who ?? scope.tenant,
    }));
    const { decisionSeq: firstSeq } = await controller.decideToolCalls(scope, head.id, decisions);
    // A decision is only accepted for a call of the open step (rule `approval pairing`), so both are there.
    if (!open?.step || !turnStart) throw new Error(`session ${head.id}: a decision was accepted outside an open step`);
    const continuing = { turn: open.turn, turnStartSeq: tail.turnStart!.seq, seenThrough: firstSeq };
    await stream(res, req, scope, { chatId, sessionId: head.id, inputId: turnStart.inputId }, firstSeq, continuing);
  }

  /** GET /chat/<id>/stream: the open turn from its start (or the input waiting for one, or an interrupted last turn); 204 when none. */
  async function resumeAnswer(req: http.IncomingMessage, res: http.ServerResponse, scope: Scope, encodedId: string): Promise<void> {
    const { store } = readsOf(scope, res);
    const chatId = decodedPathSegment(encodedId);
    if (chatId === undefined) return replyError(res, 400, 'BAD_USER_INPUT', 'the chat id in the path is not percent-encoded UTF-8', cors(req));
    parseInput(idSchema, chatId, 'the chat id');
    const chat = await chatSession(scope, store, chatId, false);
    if (!chat) return void res.writeHead(204, { 'cache-control': 'no-store', ...cors(req) }).end();
    const head = await headOf(store, chat);
    const startEvent = await store.log.lastOfType(head.id, 'turn/start');
    const start = startEvent && { seq: startEvent.seq, ...dataOf(startEvent, 'turn/start')! };
    const endEvent = start && (await store.log.firstOfType(head.id, 'turn/end', start.seq));
    const end = endEvent && { inherited: endEvent.inherited, ...dataOf(endEvent, 'turn/end')! };
    const follow = async (inputId: string, afterSeq: number) => stream(res, req, scope, { chatId, sessionId: head.id, inputId }, afterSeq);
    if (start && !end) return follow(start.inputId, start.seq - 1);
    if (head.pendingInputCount > 0) {
      const [waiting] = await store.log.pendingInputs(head.id, head.pendingInputCount);
      if (waiting) return follow(waiting.inputId, waiting.seq);
    }
    // A turn a restart interrupted stays the chat's answer until the next message: its replay ends in an error part.
    if (start && end?.reason === 'interrupted' && !end.inherited) return follow(start.inputId, start.seq - 1);
    res.writeHead(204, { 'cache-control': 'no-store', ...cors(req) }).end();
  }

  /** The session's turn updates after `afterSeq`: from the log, then live. */
  function subscribe(scope: Scope, res: http.ServerResponse, sessionId: string, afterSeq: number): Promise<AsyncIterableIterator<TurnUpdate>> {
    const { store, statements } = readsOf(scope, res);
    const eventCount = async () => (await store.requireSession(sessionId)).eventCount;
    return live.sessionTurnsAfter(sessionId, afterSeq, eventCount, statements);
  }

  /**
   * Streams the answer to `inputId` from the log after `from` (a seq, or the subscription already made from one),
   * then live, until its turn ends or the client leaves.
   */
  async function stream(
    res: http.ServerResponse,
    req: http.IncomingMessage,
    scope: Scope,
    meta: { chatId: string; sessionId: string; inputId: string },
    from: number | AsyncIterableIterator<TurnUpdate>,
    continuing?: TurnInProgress,
  ): Promise<void> {
    const { store } = readsOf(scope, res);
    let gone = res.destroyed;
    // eslint-disable-next-line prefer-const -- the close handler reads it before the subscription is made
    let turns: AsyncIterableIterator<TurnUpdate> | undefined;
    res.once('close', () => {
      gone = true;
      void turns?.return?.();
    });
    turns = typeof from === 'number' ? await subscribe(scope, res, meta.sessionId, from) : from;
    if (gone) return void (await turns.return?.()); // the client left while it was subscribing
    res.writeHead(200, { ...STREAM_HEADERS, ...cors(req) });
    res.flushHeaders();
    const write = (chunk: UIChunk) => {
      if (res.writableEnded || res.destroyed) return;
      const json = JSON.stringify(chunk);
      checkEventBytes(Buffer.byteLength(json), guard.maxResponseBytes);
      res.write(`data: ${json}\n\n`);
    };
    const answer = new ChatAnswer({ ...meta }, readerOf(store, meta.sessionId), write, continuing);
    answer.start();
    try {
      for await (const update of turns) {
        await answer.update(update);
        if (answer.finished) break;
        // A client that reads slowly is written to as it drains; meanwhile its queue merges text deltas (bounded).
        if (!gone) await drained(res);
      }
      if (!answer.finished && !res.destroyed) answer.fail(`session ${meta.sessionId} was deleted during the answer`);
    } catch (err) {
      if (err instanceof ForklineError || err instanceof StatementTimeoutError || err instanceof EventTooLarge) answer.fail(err.message);
      else if (err instanceof StatementAbandonedError)
        return; // its client has gone
      else if (isDatabaseUnavailable(err)) answer.fail('the database is unavailable; retry shortly');
      else {
        const requestId = randomUUID().slice(0, 8);
        opts.log(`chat stream failed (request ${requestId})`, err);
        answer.fail(`Unexpected error (request ${requestId})`);
      }
    } finally {
      await turns.return?.();
      if (!res.destroyed) res.end('data: [DONE]\n\n');
    }
  }

  /** The chat's own session: the caller's session of that id, or the one the id names in the tenant (made when `create`). */
  async function chatSession(scope: Scope, store: TenantStore, chatId: string, create: boolean): Promise<SessionRow | undefined> {
    if (chatId.startsWith('ses_')) return store.requireSession(chatId);
    const id = chatSessionId(scope.tenant, chatId);
    const found = await store.getSession(id);
    if (found || !create) return found ?? undefined;
    try {
      return await controller.createSession(scope, { title: `Chat ${chatId}`.slice(0, 200) }, {}, id);
    } catch (err) {
      // Two first requests at once: the other one made it.
      const made = await store.getSession(id);
      if (made) return made;
      throw err;
    }
  }

  /** The session answering the chat now: the last head recorded in it (a regenerated branch), else the chat's own. */
  async function headOf(store: TenantStore, chat: SessionRow): Promise<SessionRow> {
    const recorded = await store.log.lastOfType(chat.id, HEAD_EVENT);
    const headId = recorded && headOfChat.safeParse(recorded.data).data?.sessionId;
    if (!headId) return chat;
    return (await store.getSession(headId)) ?? chat; // a deleted branch: the chat's own session answers again
  }

  function readerOf(store: TenantStore, sessionId: string): AnswerReader {
    return {
      answersAndResults: async (seq) => {
        const { events, cut } = await store.log.ofTypesWithin(sessionId, ANSWER_TYPES, { fromSeq: seq, toSeq: MAX_SEQ, limit: ANSWERS_PAGE });
        return { events, more: cut || events.length === ANSWERS_PAGE };
      },
      turnOutcome: async (turn) => {
        // Its usage summed over all its answers in the database (a turn can hold 200,000 events), and its error
        // report's message read apart, at most ERROR_TEXT_CHARS of it (a report in a recording can be megabytes).
        const row = { ...turn, sessionId, lastSeq: turn.endSeq };
        const [totals, error] = await Promise.all([turnTotalsOf(store.log, row), turnError(store.log, row, new TextBudget(ERROR_TEXT_CHARS))]);
        return { usage: { inputTokens: totals.usage?.inputTokens ?? 0, outputTokens: totals.usage?.outputTokens ?? 0 }, error: error?.text };
      },
      awaitsApproval: async (callId) => {
        const { eventCount } = await store.requireSession(sessionId);
        const { open } = await store.log.openTailFolded(sessionId, eventCount - 1);
        return awaitingApproval(open).some((c) => c.id === callId);
      },
    };
  }
}
