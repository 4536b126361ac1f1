// POST /agui: the AG-UI protocol (README "AG-UI"). A RunAgentInput queues its
// last user message in the thread (a session: the given one, or a new one),
// and the answer streams back as AG-UI events over SSE (or AG-UI protobuf when
// the client asks for it). `parentRunId` forks the thread at the end of that
// run's turn first (time travel / branching). The caller is decided by the
// same guard as /graphql (http/guard.ts): tokens, tenants, rate limits, the Origin, the body limit.
import type http from 'node:http';
import { randomUUID } from 'node:crypto';
import { EventType, PROTOCOL_VERSION, type BaseEvent, type Message } from '@ag-ui/core';
import { EventEncoder } from '@ag-ui/encoder';
import { z } from 'zod';
import { ForklineError } from '../core/errors.ts';
import { dataOf } from '../core/core-event.ts';
import type { Scope, SessionRow, StoredEvent, TenantStore } from '../store/session-store.ts';
import { MAX_SEQ } from '../store/session-log.ts';
import type { DoorServices } from '../host/services.ts';
import type { TurnUpdate } from '../agent/turn-updates.ts';
import type { Guard } from '../http/guard.ts';
import type { DoorStatements } from '../http/door-statements.ts';
import { StatementAbandonedError, StatementTimeoutError, type StatementScope } from '../db/statement-deadlines.ts';
import { replyError } from '../http/http-body.ts';
import { drained } from '../http/drained.ts';
import { checkEventBytes, EventTooLarge } from '../http/event-ceiling.ts';
import { isDatabaseUnavailable } from '../db/unavailable.ts';
import { ClientCallIds, messagesOf, RunTranslator } from './agui-events.ts';
import { runRequestOf, type RunRequest } from './run-input.ts';

/**
 * Plugin event recording which input an AG-UI run queued (parentRunId finds the run's turn by it), and the seq its
 * MESSAGES_SNAPSHOT showed the thread through (`historyTo`: a resume gives the turn's calls the same ids by it).
 */
export const RUN_EVENT = 'plugin/agui/run';
const runEventData = z.object({ runId: z.string(), inputId: z.string(), historyTo: z.number().int().optional() });
/** A RUN_EVENT's run and input (plugin data: checked, not assumed). */
const runOf = (e: StoredEvent | undefined) => (e ? runEventData.safeParse(e.data).data : undefined);

export interface AguiOptions {
  services: Pick<DoorServices, 'store' | 'controller' | 'live'>;
  /** The guard of every door: the caller, the Origin (configured origins get CORS headers and preflights), the body limit. */
  guard: Guard;
  log: (msg: string, err?: unknown) => void;
  /** A run's reads: within its request's scope (http/door-statements.ts), cancelled once its client leaves. */
  statements: DoorStatements;
}

/** What messagesOf reads. */
const SNAPSHOT_TYPES = ['inbox/add', 'turn/start', 'model/message', 'tool/result'];
/** Events behind MESSAGES_SNAPSHOT: the latest turns, never the whole log (docs/contract.md#log: a run costs what it adds). */
export const SNAPSHOT_EVENTS = 2000;

/**
 * The events MESSAGES_SNAPSHOT is made of: the latest `limit` of SNAPSHOT_TYPES
 * (fewer when they pass the store's PAGE_BYTES of data), from the first turn/start among them (a message never starts mid-turn), plus
 * the inbox/add of each of those turns' inputs that falls before the window,
 * read in one statement within what the window left of PAGE_BYTES, newest
 * first: an input can be megabytes, so when they pass it the window starts at
 * the oldest turn whose input fits (docs/operations.md "Memory and time"). A
 * log shorter than the window is read whole. `toSeq`: the log as it was
 * through that seq (the same window, however much was appended since).
 */
export async function snapshotHistory(log: TenantStore['log'], sessionId: string, limit = SNAPSHOT_EVENTS, toSeq = MAX_SEQ): Promise<StoredEvent[]> {
  const { events, cut, bytes = 0 } = await log.ofTypesWithin(sessionId, SNAPSHOT_TYPES, { fromSeq: 0, toSeq, limit, descending: true });
  const recent = events.reverse();
  if (recent.length < limit && !cut) return recent;
  let from = recent.findIndex((e) => e.type === 'turn/start');
  if (from < 0) return [];
  // Inputs the window holds (before its first turn too), and those its turns took before it, read apart.
  const added = new Set(recent.flatMap((e) => dataOf(e, 'inbox/add')?.inputId ?? []));
  const missing = recent.slice(from).flatMap((e) => {
    const id = dataOf(e, 'turn/start')?.inputId;
    return id !== undefined && !added.has(id) ? [id] : [];
  });
  const room = log.pageBytes - bytes;
  const inputs = missing.length && room > 0 ? await log.inboxAddsWithin(sessionId, missing, recent[from].seq, room) : { events: [], cut: missing.length > 0 };
  if (inputs.cut) {
    // The newest turns whose inputs were read: the window starts at the oldest of them.
    for (const e of inputs.events) added.add(dataOf(e, 'inbox/add')!.inputId);
    const lacking = recent.findLastIndex((e) => e.type === 'turn/start' && !added.has(dataOf(e, 'turn/start')!.inputId));
    from = recent.findIndex((e, i) => i > lacking && e.type === 'turn/start');
    if (from < 0) return [];
  }
  return [...inputs.events.reverse(), ...recent.filter((e, i) => i >= from || e.type === 'inbox/add')];
}

export function aguiHandler(opts: AguiOptions) {
  const { store: stores, controller, live } = opts.services;

  const { guard } = opts;
  const cors = (req: http.IncomingMessage) => guard.corsHeaders(req);

  return async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    if (req.method === 'OPTIONS' && guard.originAllowed(req) && Object.keys(cors(req)).length) {
      res
        .writeHead(204, {
          ...cors(req),
          'access-control-allow-methods': 'POST',
          'access-control-allow-headers': 'authorization, content-type, accept',
          'access-control-max-age': '600',
        })
        .end();
      return;
    }
    if (req.method !== 'POST') return replyError(res, 405, 'BAD_USER_INPUT', 'POST an AG-UI RunAgentInput to /agui', { allow: 'POST' });
    const principal = guard.callerOf(req, res, cors(req));
    if (!principal) return;
    const type = (req.headers['content-type'] ?? '').split(';')[0].trim().toLowerCase();
    if (type !== 'application/json') return replyError(res, 415, 'BAD_USER_INPUT', 'send the RunAgentInput as application/json', cors(req));

    // The body (within the limit, strict UTF-8), what the run uses of its RunAgentInput, the input rules of every door.
    const input = await guard.readChatRequest(req, res, runRequestOf, cors(req));
    if (!input) return;

    // A run is an event stream held open, counted as an SSE subscription is (its tenant's and its token's caps).
    const capped = guard.openStream(req, res);
    if (capped) return replyError(res, capped.status, capped.code, capped.message, { ...capped.headers, ...cors(req) });

    // From here on every answer is an event stream; failures are RUN_ERROR.
    const encoder = new EventEncoder({ accept: req.headers.accept });
    res.writeHead(200, { 'content-type': encoder.getContentType(), 'cache-control': 'no-store', 'x-accel-buffering': 'no', ...cors(req) });
    res.flushHeaders();
    let open = true;
    const closed = new Promise<void>((resolve) => res.once('close', () => ((open = false), resolve())));
    const send = (event: BaseEvent) => {
      if (!open) return;
      const bytes = encoder.encodeBinary(event);
      checkEventBytes(bytes.byteLength, guard.maxResponseBytes);
      res.write(bytes);
    };
    // A client that reads slowly is written to as it drains (nothing more is read for it meanwhile).
    const stream = { send, closed, drained: () => drained(res) };
    let runStarted = false;
    const runError = (message: string, code: string) => {
      if (!runStarted) send({ type: EventType.RUN_STARTED, threadId: input.threadId, runId: input.runId });
      runStarted = true;
      send({ type: EventType.RUN_ERROR, message, code });
    };
    try {
      const scope = { tenant: principal.tenant };
      const by = principal.who ?? principal.tenant;
      // Each statement bounded on its own (a run streams for as long as its turn lasts); all of them cancelled once the client leaves.
      const statements = opts.statements(res, 'statement');
      if (input.resume?.length) await resumeTurn(scope, statements, by, input, stream, () => (runStarted = true));
      else await runTurn(scope, statements, input, stream, () => (runStarted = true), runError);
    } catch (err) {
      if (err instanceof ForklineError || err instanceof StatementTimeoutError || err instanceof EventTooLarge) runError(err.message, err.code);
      else if (err instanceof StatementAbandonedError)
        return; // its client has gone: nobody to answer
      else if (isDatabaseUnavailable(err)) runError('the database is unavailable; retry shortly', 'SERVICE_UNAVAILABLE');
      else {
        const requestId = randomUUID().slice(0, 8);
        opts.log(`AG-UI run failed (request ${requestId})`, err);
        runError(`Unexpected error (request ${requestId})`, 'INTERNAL_SERVER_ERROR');
      }
    } finally {
      res.end();
    }
  };

  /** Resolves the thread, queues the message, and streams the turn that answers it. */
  async function runTurn(
    scope: Scope,
    statements: StatementScope | undefined,
    input: RunRequest,
    stream: RunStream,
    markStarted: () => void,
    runError: (message: string, code: string) => void,
  ): Promise<void> {
    const { send } = stream;
    const { text } = input;
    if (text === undefined) return runError('the input holds no user message to send', 'BAD_USER_INPUT');
    const store = stores.forTenant(scope).reading(statements);

    // The thread: an existing session (by id), a fork of it at a run's end, or a new session.
    let session: SessionRow;
    let discardBranch: (() => Promise<void>) | undefined;
    if (input.parentRunId) {
      const parent = await store.requireSession(input.threadId);
      const cut = await runEndSeq(store, parent.id, input.parentRunId);
      if (typeof cut === 'string') return runError(cut, 'BAD_USER_INPUT');
      const forkKey = { key: `agui-fork:${input.runId}` };
      const fork = await controller.forkSession(scope, parent.id, cut, {}, forkKey);
      session = fork.session;
      // The branch is the run's: a refused message (the inbox's bounds: the branch carries the inputs waiting at its cut)
      // takes it back, with its key, so nothing of the run is left and a retry branches again.
      discardBranch = async () => void (await controller.discardSession(scope, fork.session.id, forkKey));
    } else if (input.threadId.startsWith('ses_')) {
      session = await store.requireSession(input.threadId);
    } else {
      session = await controller.createSession(scope, { title: `AG-UI thread ${input.threadId}`.slice(0, 200) }, { key: `agui-thread:${input.runId}` });
    }
    const sessionId = session.id;

    // Turn updates (text deltas: not in the log) are listened to before anything is queued.
    const turns = live.sessionTurns(sessionId);
    let events: AsyncIterableIterator<StoredEvent> | undefined;
    try {
      // The thread as this request finds it, read before anything is queued: a client that leaves while it waits
      // has its read cancelled and sends nothing (a retry reads again below, through the seq its run recorded).
      const found = await snapshotHistory(store.log, sessionId, SNAPSHOT_EVENTS, session.eventCount - 1);
      const sent = await controller.sendMessage(scope, sessionId, text, { key: `agui-run:${input.runId}` }).catch(async (err: unknown) => {
        if (discardBranch && err instanceof ForklineError) await discardBranch();
        throw err;
      });
      // runId is the idempotency key: an input older than the session read above was
      // queued by an earlier request of this run. Such a retry records nothing new and
      // follows the run from its turn's start in the log (a finished run answers at once).
      const retry = sent.event.seq < session.eventCount;
      const turnStart = retry
        ? await findFrom(store, sessionId, 'turn/start', sent.event.seq, (e) => dataOf(e, 'turn/start')?.inputId === sent.inputId)
        : undefined;
      const from = turnStart?.seq ?? sent.event.seq;
      events = live.sessionEvents(sessionId, from - 1, statements); // the log from there (catch-up), then live
      const recorded = retry ? await findFrom(store, sessionId, RUN_EVENT, sent.event.seq, (e) => runOf(e)?.runId === input.runId) : undefined;
      // The thread as the run's first request found it (a retry: as recorded, else the log before its input).
      const historyTo = retry ? (runOf(recorded)?.historyTo ?? sent.event.seq - 1) : session.eventCount - 1;
      if (!recorded) {
        await store.append(sessionId, [
          {
            type: RUN_EVENT,
            data: { runId: input.runId, inputId: sent.inputId, historyTo, ...(input.parentRunId ? { parentRunId: input.parentRunId } : {}) },
          },
        ]);
      }
      const history = historyTo === session.eventCount - 1 ? found : await snapshotHistory(store.log, sessionId, SNAPSHOT_EVENTS, historyTo);

      send({
        type: EventType.RUN_STARTED,
        threadId: sessionId,
        runId: input.runId,
        protocolVersion: PROTOCOL_VERSION,
        ...(input.parentRunId ? { parentRunId: input.parentRunId } : {}),
      });
      markStarted();
      // The thread before the run's turn, and the run's message; the stream brings the rest.
      // The run's calls go on from the snapshot's client ids (docs/agui.md: a reused call id).
      const ids = new ClientCallIds();
      const messages: Message[] = messagesOf(turnStart ? history.filter((e) => e.seq < turnStart.seq) : history, ids);
      if (!messages.some((m) => m.id === sent.inputId)) messages.push({ id: sent.inputId, role: 'user', content: text });
      send({ type: EventType.MESSAGES_SNAPSHOT, messages });

      const translator = new RunTranslator({ threadId: sessionId, runId: input.runId, inputId: sent.inputId }, send, undefined, ids, {
        afterSeq: from - 1,
        liveFrom: session.eventCount,
      });
      await follow(translator, events, turns, stream);
      if (!translator.finished) translator.fail(`session ${sessionId} was deleted during the run`, 'SESSION_NOT_FOUND');
    } finally {
      await Promise.allSettled([turns.return?.(), events?.return?.()]);
    }
  }

  /**
   * A run that answers the interrupts a run ended with (tool approvals,
   * docs/agui.md): each resume entry is a decision (`resolved` with
   * `{approved, reason}`; `cancelled`: denied), then the turn is followed from
   * there until it ends or interrupts again.
   */
  async function resumeTurn(
    scope: Scope,
    statements: StatementScope | undefined,
    by: string,
    input: RunRequest,
    stream: RunStream,
    markStarted: () => void,
  ): Promise<void> {
    const { send } = stream;
    const store = stores.forTenant(scope).reading(statements);
    const session = await store.requireSession(input.threadId);
    const { open, turnStart } = await store.log.openTailFolded(session.id, session.eventCount - 1);
    if (!open || !turnStart) throw new ForklineError('BAD_USER_INPUT', `thread ${session.id} has no turn waiting for approval`);
    // The interrupts named calls by their client ids: the turn's calls are given them again (a later answer reaches the
    // run's stream, below, given its id there).
    const { ids, callIdOf } = await turnCallIds(store, session.id, turnStart, session.eventCount - 1);
    const turns = live.sessionTurns(session.id);
    const events = live.sessionEvents(session.id, session.eventCount - 1, statements);
    try {
      // All of the resume's decisions in one append: a refused one (a call twice, one not waiting) records none.
      // (Each entry's payload was held to the input rules with the request: run-input.ts.)
      const decisions = (input.resume ?? []).map((entry) => ({
        callId: callIdOf.get(entry.interruptId) ?? entry.interruptId,
        decision: entry.approved ? ('approved' as const) : ('denied' as const),
        reason: entry.reason,
        by,
      }));
      if (decisions.length) await controller.decideToolCalls(scope, session.id, decisions);
      send({ type: EventType.RUN_STARTED, threadId: session.id, runId: input.runId, protocolVersion: PROTOCOL_VERSION });
      markStarted();
      const translator = new RunTranslator({ threadId: session.id, runId: input.runId, inputId: '' }, send, open, ids, {
        afterSeq: session.eventCount - 1,
        liveFrom: session.eventCount,
      });
      await follow(translator, events, turns, stream);
      if (!translator.finished) translator.fail(`session ${session.id} was deleted during the run`, 'SESSION_NOT_FOUND');
    } finally {
      await Promise.allSettled([turns.return?.(), events.return?.()]);
    }
  }

  /**
   * The client ids the calls of the turn `turnStart` opens were shown under (docs/agui.md "Tool call ids"), as the
   * run that queued its input gave them: the snapshot that run showed (through the seq recorded with it; else the log
   * before the input), then the turn's answers through `toSeq`. They depend on nothing appended since, so a resume
   * after any number of later events gives the same ids, and `callIdOf` maps an interrupt's id back to its call.
   */
  async function turnCallIds(store: TenantStore, sessionId: string, turnStart: StoredEvent, toSeq: number) {
    const { turn, inputId } = dataOf(turnStart, 'turn/start')!;
    const added = await store.log.inboxAddOf(sessionId, inputId, turnStart.seq, { withoutTexts: true });
    const run = added && (await findFrom(store, sessionId, RUN_EVENT, added.seq, (e) => runOf(e)?.inputId === inputId));
    const historyTo = Math.min(runOf(run)?.historyTo ?? (added ? added.seq - 1 : -1), turnStart.seq - 1);
    const ids = new ClientCallIds();
    for (const e of historyTo < 0 ? [] : await snapshotHistory(store.log, sessionId, SNAPSHOT_EVENTS, historyTo)) {
      const d = dataOf(e, 'model/message');
      if (d) ids.message(d);
    }
    const callIdOf = new Map<string, string>();
    const PAGE = 1000;
    for (let from = turnStart.seq; from <= toSeq;) {
      const page = await store.log.ofTypes(sessionId, ['model/message'], { fromSeq: from, toSeq, limit: PAGE, withoutTexts: true });
      for (const e of page) {
        const d = dataOf(e, 'model/message');
        if (d?.turn !== turn) continue;
        ids.message(d);
        for (const c of d.toolCalls) callIdOf.set(ids.of(d.turn, d.step, c.id), c.id);
      }
      if (page.length < PAGE) break;
      from = page[page.length - 1].seq + 1;
    }
    return { ids, callIdOf };
  }

  /** The seq of the turn/end of the turn that took the input of run `runId` in the session's log, or why there is none. */
  async function runEndSeq(store: TenantStore, sessionId: string, runId: string): Promise<number | string> {
    let inputId: string | undefined;
    for await (const e of store.log.streamOfTypes(sessionId, [RUN_EVENT])) {
      const run = runOf(e);
      if (run?.runId === runId) inputId = run.inputId;
    }
    if (!inputId) return `no run ${runId} in thread ${sessionId}`;
    const added = await store.log.inboxAddOf(sessionId, inputId);
    if (!added) return `no run ${runId} in thread ${sessionId}`;
    const start = await findFrom(store, sessionId, 'turn/start', added.seq, (e) => dataOf(e, 'turn/start')?.inputId === inputId);
    if (!start) return `run ${runId} has not started yet`;
    const end = await store.log.firstOfType(sessionId, 'turn/end', start.seq);
    if (!end || dataOf(end, 'turn/end')?.turn !== dataOf(start, 'turn/start')?.turn) return `run ${runId} has not finished yet`;
    return end.seq;
  }

  /** The first event of `type` at or after `fromSeq` that `matches`, paging through the events of that type. */
  async function findFrom(
    store: TenantStore,
    sessionId: string,
    type: string,
    fromSeq: number,
    matches: (e: StoredEvent) => boolean,
  ): Promise<StoredEvent | undefined> {
    const PAGE = 50;
    for (let from = fromSeq; ;) {
      const page = await store.log.ofTypes(sessionId, [type], { fromSeq: from, toSeq: MAX_SEQ, limit: PAGE });
      const found = page.find(matches);
      if (found || page.length < PAGE) return found;
      from = page[page.length - 1].seq + 1;
    }
  }
}

/** A run's response: where its events go, when its client leaves, and how to wait for a client that reads slowly. */
interface RunStream {
  send: (e: BaseEvent) => void;
  closed: Promise<void>;
  /** A promise while the response's buffer is full (resolved on drain or close), else undefined. */
  drained: () => Promise<void> | undefined;
}

/**
 * Feeds the translator the log's events and the turn updates as they come,
 * until the run ends or the client leaves. While the client's buffer is full
 * nothing more is read: the log's events wait in the log, and the turn
 * updates in their subscription's bounded queue (SUBSCRIBER_TOO_SLOW past it),
 * not in this process's socket buffer.
 */
async function follow(
  translator: RunTranslator,
  events: AsyncIterableIterator<StoredEvent>,
  turns: AsyncIterableIterator<TurnUpdate>,
  { closed, drained }: RunStream,
): Promise<void> {
  type Item = { event: StoredEvent } | { update: TurnUpdate } | { end: 'events' | 'turns' | 'client' };
  const queue: Item[] = [];
  let wake: (() => void) | undefined;
  const push = (item: Item) => {
    queue.push(item);
    wake?.();
  };
  const pump = async <T>(it: AsyncIterableIterator<T>, wrap: (v: T) => Item, name: 'events' | 'turns') => {
    try {
      for (;;) {
        await drained();
        const r = await it.next();
        if (r.done) break;
        push(wrap(r.value));
        if (translator.finished) break;
      }
    } catch {
      // a closed subscription ends like a finished one
    }
    push({ end: name });
  };
  void pump(events, (event) => ({ event }), 'events');
  void pump(turns, (update) => ({ update }), 'turns');
  void closed.then(() => push({ end: 'client' }));
  while (!translator.finished) {
    if (queue.length === 0) await new Promise<void>((r) => (wake = r));
    wake = undefined;
    for (const item of queue.splice(0)) {
      if ('event' in item) translator.event(item.event);
      else if ('update' in item) translator.update(item.update);
      else if (item.end !== 'turns') return; // the log's stream ended (session deleted) or the client left
      if (translator.finished) return;
    }
    await drained();
  }
}
