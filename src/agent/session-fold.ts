// The agent's running view of a session (issue: a turn costs the new events,
// not the log): the reducer state and the model conversation, applied only to
// events appended since. The log is append-only and immutable, so a fold kept
// from an earlier lease is still a correct prefix: catching up reads what
// others appended in between. A cold start replays once.
import { LRUCache } from 'lru-cache';
import { LogState, type LogStateSnapshot } from '../core/log-state.ts';
import { Conversation, type ConversationHistory, type ConversationSnapshot } from '../core/model-request.ts';
import type { ChatMessage } from '../core/chat.ts';
import type { LogEvent } from '../core/events.ts';
import { dataOf } from '../core/core-event.ts';
import { STREAM_PAGE_BYTES, type Db, type SessionLog } from '../store/session-log.ts';
import type { SessionStore } from '../store/session-store.ts';
import { syntheticResult, type ForkOrigin } from './agent-observer.ts';
import { COMPACTION_END, CompactionBracket, completedCompaction, type CompletedCompaction } from './compaction.ts';
import type { UsageMark } from './context-budget.ts';

const CATCH_UP_PAGE = 5000;

/** What an empty fold holds besides its conversation (the reducer state, the bracket), measured. */
const FOLD_BASE_BYTES = 2048;

/** The default bound of a process's fold cache, in estimated heap bytes (FORKLINE_FOLD_CACHE_MAX_BYTES; docs/operations.md). */
export const DEFAULT_FOLD_CACHE_BYTES = 64 * 1024 * 1024;

/**
 * The shape of a fold checkpoint (store/fold-checkpoints.ts): a checkpoint of another version is not used (the log is replayed).
 * 4: answered calls are kept by turn, step and id (core/model-request.ts); a 3 keeps bare ids, and its rendered messages may
 * show a call whose id an earlier step answered without its own answer (a request chat APIs refuse), so it is replayed.
 * 5: rendered calls go by wire ids (core/wire-names.ts); a 4's may send an id a provider refuses, so it is replayed.
 */
const SNAPSHOT_VERSION = 5;

/** A fold as a checkpoint stores it: the head and the rendered messages (one line each), and the conversation's history apart (Conversation.snapshot). */
export interface FoldCheckpointText {
  state: string;
  history: string;
}

/** The first line of a checkpoint's state. */
interface FoldSnapshotHead {
  v: typeof SNAPSHOT_VERSION;
  state: LogStateSnapshot;
  conversation: ConversationSnapshot['head'];
  compaction: ReturnType<CompactionBracket['snapshot']>;
  lastTurnEndSeq: number;
  usageMark?: UsageMark;
  forkOrigin?: ForkOrigin;
  turnsSinceSeed: number;
  lastTurnStartSeq: number;
}

/** Where a cold fold starts: the store's fold checkpoints (a store without them: the compaction path only). */
type ColdStore = Pick<SessionStore, 'log' | 'stateAt'> & Partial<Pick<SessionStore, 'foldCheckpoints'>>;

export class SessionFold {
  /** The reducer state (replaced once, when a cold fold starts after a compaction). */
  state = new LogState();
  conversation = new Conversation();
  /** The agent's compaction bracket: a replacement applies once its compaction ends (compaction.ts). */
  compaction = new CompactionBracket();
  /** The seq of the newest fold checkpoint this fold started from or wrote (-1: none). */
  checkpointSeq = -1;
  /** Seq of the last turn/end (-1: none): what a compaction covers by default. */
  lastTurnEndSeq = -1;
  /** The provider's count for the last model call whose request still starts the next one (context-budget.ts). */
  usageMark?: UsageMark;
  /** Where the session was forked (its last seed), for telemetry's fork link. */
  forkOrigin?: ForkOrigin;
  /** Turns started since the last seed (0 with a forkOrigin: the next turn is the fork's first). */
  turnsSinceSeed = 0;
  private lastTurnStartSeq = -1;
  /** The session's tenant, once the runner needed it (tool-catalog.ts: servers limited to tenants). */
  tenant?: string;
  /** The fold was the whole log when the lease was claimed (claimedAt): the next cold catch-up reads nothing. */
  private endsAtClaim = false;

  constructor(readonly sessionId: string) {}

  /** Estimated heap bytes the fold holds (the fold cache's measure). */
  get approxBytes(): number {
    return FOLD_BASE_BYTES + this.conversation.approxBytes;
  }

  /** The seq of the next event the fold expects. */
  get nextSeq(): number {
    return this.state.nextSeq;
  }

  /** Applies events that continue the fold exactly (the caller reads any gap first). */
  apply(events: Iterable<LogEvent>): void {
    for (const e of events) {
      if (e.seq !== this.state.nextSeq) throw new Error(`session fold of ${this.sessionId}: expected seq ${this.state.nextSeq}, got ${e.seq}`);
      this.state.apply(e);
      for (const c of this.compaction.filter(e)) {
        this.conversation.apply(c);
        if (c.type === 'surface/replace') this.usageMark = undefined; // history changed: the provider's count no longer holds
      }
      if (e.type === 'turn/end') this.lastTurnEndSeq = e.seq;
      this.track(e);
    }
  }

  /** Applies an event written right at the fold's end (an input this process queued); false: the fold ends elsewhere. */
  continueWith(event: LogEvent): boolean {
    if (event.seq !== this.nextSeq) return false;
    this.apply([event]);
    return true;
  }

  /**
   * The session's lease was claimed when its log was `eventCount` events
   * long (Lease.eventCount): a fold of that length was the whole log then, so
   * the run's cold catch-up (catchUpCold) reads nothing. What comes after the
   * claim without the lease (messages, cancellations) the runner's first
   * append finds and reads (`appended`), as when it comes after a read.
   */
  claimedAt(eventCount: number): void {
    this.endsAtClaim = eventCount === this.nextSeq;
  }

  /** Fork origin bookkeeping: a few comparisons per event. */
  private track(e: LogEvent): void {
    if (e.type === 'turn/start') {
      this.turnsSinceSeed++;
      this.lastTurnStartSeq = e.seq;
    } else if (e.type === 'tool/result' && e.synthetic && this.forkOrigin && this.turnsSinceSeed === 0) {
      // The seed's closers follow its end-seed marker.
      const d = dataOf(e, 'tool/result')!;
      this.forkOrigin.synthetic.push(syntheticResult(d, d.status === 'interrupted' ? 'interrupted' : 'forked'));
    } else if (e.type === 'session/end-seed') {
      const d = dataOf(e, 'session/end-seed')!;
      this.forkOrigin = {
        parentSessionId: d.parentSessionId,
        cutSeq: d.cutSeq,
        turn: this.state.lastTurn,
        turnStartSeq: this.lastTurnStartSeq,
        // Who ran that turn: the parent, unless the cut falls in what the parent inherited (the runner asks the lineage).
        turnSessionId: d.parentSessionId,
        synthetic: [],
      };
      this.turnsSinceSeed = 0;
    }
  }

  /**
   * The fold as text, for a checkpoint at `nextSeq - 1` (store/fold-checkpoints.ts):
   * `state`, two lines of JSON (JSON text holds no raw line break) with what
   * the next request needs, and `history`, the bulk of a long session, which a
   * restore reads only when history is rendered again.
   */
  snapshot(): FoldCheckpointText {
    const conversation = this.conversation.snapshot();
    const head: FoldSnapshotHead = {
      v: SNAPSHOT_VERSION,
      state: this.state.snapshot(),
      conversation: conversation.head,
      compaction: this.compaction.snapshot(),
      lastTurnEndSeq: this.lastTurnEndSeq,
      usageMark: this.usageMark,
      forkOrigin: this.forkOrigin,
      turnsSinceSeed: this.turnsSinceSeed,
      lastTurnStartSeq: this.lastTurnStartSeq,
    };
    return { state: `${JSON.stringify(head)}\n${JSON.stringify(conversation.messages)}`, history: JSON.stringify(conversation.history) };
  }

  /**
   * Takes the state of a checkpoint through `seq` (an empty fold only); false
   * when it is of another version or another seq, or is not the JSON a
   * snapshot writes (the fold is left as it was: the log is replayed).
   */
  private restore(seq: number, checkpoint: { state: string; history(): string }): boolean {
    const { state, history } = checkpoint; // the closure below keeps only the compressed history, not the state's text
    const headEnd = state.indexOf('\n');
    if (headEnd < 0) return false; // another format
    let snap: FoldSnapshotHead;
    let restored: { state: LogState; conversation: Conversation; compaction: CompactionBracket };
    try {
      snap = JSON.parse(state.slice(0, headEnd)) as FoldSnapshotHead;
      if (snap?.v !== SNAPSHOT_VERSION || snap.state?.nextSeq !== seq + 1) return false;
      const messagesText = state.slice(headEnd + 1);
      const messages = JSON.parse(messagesText) as ChatMessage[];
      if (!Array.isArray(messages)) return false;
      restored = {
        state: LogState.restore(snap.state),
        conversation: Conversation.restore(snap.conversation, messages, () => JSON.parse(history()) as ConversationHistory, messagesText.length),
        compaction: CompactionBracket.restore(snap.compaction),
      };
    } catch {
      return false; // a damaged checkpoint: nothing of it is taken
    }
    this.state = restored.state;
    this.conversation = restored.conversation;
    this.compaction = restored.compaction;
    this.lastTurnEndSeq = snap.lastTurnEndSeq;
    this.usageMark = snap.usageMark;
    this.forkOrigin = snap.forkOrigin;
    this.turnsSinceSeed = snap.turnsSinceSeed;
    this.lastTurnStartSeq = snap.lastTurnStartSeq;
    this.checkpointSeq = seq;
    return true;
  }

  /** The last completed compaction that covers the history from seq 0 (a failed one's end is skipped). */
  private async lastCompaction(log: SessionLog) {
    let end = await log.lastOfType(this.sessionId, COMPACTION_END);
    for (let tries = 0; end && tries < 3; tries++) {
      const d = completedCompaction(end.data);
      if (d && d.fromSeq === 0 && d.toSeq < d.summarySeq) break;
      end = end.seq > 0 ? await log.lastOfType(this.sessionId, COMPACTION_END, end.seq - 1) : undefined; // a failed compaction's end
    }
    const d = end && completedCompaction(end.data);
    return d && d.fromSeq === 0 ? d : undefined;
  }

  /**
   * A cold fold starts after the last completed compaction that covers the
   * history from seq 0 (its end names its range and its summary), instead of
   * replaying from seq 0: the reducer state right after the range (the store
   * reads its open turn and inbox), the inputs waiting there (a turn after it
   * may take one), the model, tool set and instructions in force. The compaction's own
   * events follow the range, so the replay that follows applies its summary.
   * Returns the seq it starts after (-1: from the beginning).
   */
  async coldStart(store: Pick<SessionStore, 'log' | 'stateAt'>, compaction?: CompletedCompaction | null): Promise<number> {
    if (this.nextSeq !== 0) return this.nextSeq - 1;
    const { log } = store;
    // null: looked up already, none.
    const d = compaction === undefined ? await this.lastCompaction(log) : compaction;
    if (!d) return -1;
    const through = d.toSeq;
    const [state, model, tools, runnerTools, title, instructions, turnEnd] = await Promise.all([
      store.stateAt(this.sessionId, through),
      log.lastOfType(this.sessionId, 'session/model', through),
      log.lastOfType(this.sessionId, 'session/tools', through),
      log.lastOfType(this.sessionId, 'session/runner-tools', through),
      log.lastOfType(this.sessionId, 'session/title', through),
      log.lastOfType(this.sessionId, 'session/instructions', through),
      log.lastOfType(this.sessionId, 'turn/end', through),
    ]);
    if (model) state.model = dataOf(model, 'session/model');
    if (tools) state.tools = dataOf(tools, 'session/tools')?.tools;
    if (runnerTools) state.runnerTools = dataOf(runnerTools, 'session/runner-tools')?.tools;
    if (title) state.title = dataOf(title, 'session/title')?.title;
    if (instructions) {
      const text = dataOf(instructions, 'session/instructions')?.text ?? '';
      state.instructions = text || undefined;
      this.conversation.setInstructions(text);
    }
    this.state = state;
    // The texts of inputs waiting at the cut: a turn after it takes them.
    for (const p of state.pendingInputs)
      this.conversation.apply({
        seq: p.seq,
        type: 'inbox/add',
        data: { inputId: p.inputId, text: p.text, ...(p.responseFormat ? { responseFormat: p.responseFormat } : {}) },
      });
    this.lastTurnEndSeq = turnEnd?.seq ?? -1;
    return through;
  }

  /**
   * Builds a cold fold to the end of the log: a log of one page is read and
   * applied as it is (one read); a longer one starts from its newest fold
   * checkpoint (store/fold-checkpoints.ts) or its last compaction (coldStart),
   * whichever is later, and reads only the events after it.
   */
  async catchUpCold(store: ColdStore): Promise<number> {
    if (this.endsAtClaim) {
      this.endsAtClaim = false;
      return 0;
    }
    if (this.nextSeq !== 0) return this.catchUp(store.log);
    // Held to the store's page bytes: a log of a few huge events is not read whole (docs/operations.md "Memory and time").
    const { events: first, cut } = await store.log.pageWithin(this.sessionId, -1, CATCH_UP_PAGE, undefined, STREAM_PAGE_BYTES);
    if (!cut && first.length < CATCH_UP_PAGE) {
      this.apply(first);
      return first.length;
    }
    const [checkpoint, compaction] = await Promise.all([store.foldCheckpoints?.nearest(this.sessionId), this.lastCompaction(store.log)]);
    // A checkpoint holds everything through its seq (summaries included): the later starting point reads fewer events.
    const from =
      checkpoint && checkpoint.seq >= (compaction?.toSeq ?? -1) && this.restore(checkpoint.seq, checkpoint)
        ? checkpoint.seq
        : await this.coldStart(store, compaction ?? null);
    const kept = first.filter((e) => e.seq > from);
    this.apply(kept);
    return kept.length + (await this.catchUp(store.log));
  }

  /**
   * Reads and applies what was appended since the fold's end, up to `endSeq` (exclusive), on `db` (a request's scoped
   * reads: Session.modelRequest; default: the pool). Returns the events read. A read that fails leaves the pages
   * applied before it: the fold is consistent, only shorter.
   */
  async catchUp(log: SessionLog, endSeq?: number, db?: Db): Promise<number> {
    this.endsAtClaim = false;
    let read = 0;
    for await (const page of log.pages(this.sessionId, { afterSeq: this.nextSeq - 1, endSeq, pageSize: CATCH_UP_PAGE, pageBytes: STREAM_PAGE_BYTES, db })) {
      this.apply(page);
      read += page.length;
    }
    return read;
  }

  /** Applies events the runner just appended, after reading any that others appended before them. */
  async appended(log: SessionLog, written: readonly LogEvent[]): Promise<void> {
    if (written.length === 0) return;
    if (written[0].seq > this.nextSeq) await this.catchUp(log, written[0].seq);
    this.apply(written);
  }
}

/**
 * Folds of recently run sessions, bounded by the heap bytes they hold,
 * estimated from what each holds (a fold holds its session's conversation: its
 * text is about a third of that), and by count when `maxSessions` is given.
 * Only the host that holds a session's lease uses its fold, so an entry is
 * taken out while it is in use.
 *
 * The host's cache has no count bound of its own: a fold queued input
 * continued (SessionHost.inputQueued) waits here for its claim, and with 1,000
 * at most, a burst of more sessions than that (the turns bench's 3,000 and
 * 10,000) evicted the folds of the oldest waiting ones, the next to be claimed,
 * as finished turns put theirs back: each of those turns read its log first.
 */
export class FoldCache {
  private readonly folds: LRUCache<string, SessionFold>;

  constructor(maxSessions?: number, maxBytes = DEFAULT_FOLD_CACHE_BYTES) {
    // A fold is measured when it is put: one taken out, grown and put back is measured again.
    this.folds = new LRUCache({ ...(maxSessions ? { max: maxSessions } : {}), maxSize: maxBytes, sizeCalculation: (f) => f.approxBytes });
  }

  /** The cached fold of the session (removed from the cache), or a new empty one. */
  take(sessionId: string): SessionFold {
    const fold = this.folds.get(sessionId);
    if (!fold) return new SessionFold(sessionId);
    this.folds.delete(sessionId);
    return fold;
  }

  /** The cached fold of the session, left in the cache (undefined: none, or taken out by its user). */
  peek(sessionId: string): SessionFold | undefined {
    return this.folds.peek(sessionId);
  }

  /** Keeps the fold, evicting the least recently used beyond either bound (one larger than `maxBytes` is not kept). */
  put(fold: SessionFold): void {
    this.folds.set(fold.sessionId, fold);
  }

  forget(sessionId: string): void {
    this.folds.delete(sessionId);
  }

  has(sessionId: string): boolean {
    return this.folds.has(sessionId);
  }

  get size(): number {
    return this.folds.size;
  }

  /** The estimated heap bytes of the folds kept. */
  get bytes(): number {
    return this.folds.calculatedSize;
  }
}
