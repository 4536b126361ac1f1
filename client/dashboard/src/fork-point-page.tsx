// The children forked at one event of a session, side by side: a fan-out's
// variants (or every fork, branch and edit made there) with the message each
// was given and its latest answer (Session.lastAnswer), live as they answer
// (sessionsChanged names each child as it appends), a running one's text as
// it streams (sessionsTurns: one subscription for every card). A variant whose last turn failed says failed,
// with its error (Session.lastTurn), not idle.
import { useEffect, useRef, useState } from 'preact/hooks';
import { DashboardForkPointDocument, type VariantFieldsFragment } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { LivePageHead, pendingPage, useLiveQuery } from './live-query.tsx';
import { diffPath, eventPath, sessionPath } from './router.ts';
import { followSessionsLiveSteps, type LiveStep } from './session-log.ts';
import { Badge } from './widgets.tsx';
import { formatDuration, formatUsd, shownName } from './format.ts';
import './fork-family.css';
import { visibleText } from '../../../src/core/visible-text.ts';
import { LongText } from './long-text.tsx';

/** The parent and its children at `seq`, read again when one of them (or a new one there) changes. */
function useForkPoint(id: string, seq: number) {
  const { value, error } = useLiveQuery(
    `${id}@${seq}`,
    id,
    async () => (await forkline.query(DashboardForkPointDocument, { id, seq })).session ?? null,
    (s) => s.id === id || (s.parent?.id === id && s.forkedAtSeq === seq),
  );
  return { parent: value, error };
}

export function ForkPointPage({ id, seq }: { id: string; seq: number }) {
  const { parent, error } = useForkPoint(id, seq);
  const children = parent?.children.edges.map((e) => e.node) ?? [];
  const live = useStreaming(children);
  const pending = pendingPage('fork-point-page', id, parent, error);
  if (pending || !parent) return pending;
  const first = children[0];
  return (
    <main id="main" tabIndex={-1} class="fork-point-page" data-session-id={id} data-seq={seq}>
      <LivePageHead title={`${children.length} ${children.length === 1 ? 'child' : 'children'} forked at event ${seq}`} error={error}>
        of <a href={sessionPath(id)}>{visibleText(parent.title || id)}</a> · each inherits events 0–{seq} · latest answers, live
        {parent.children.pageInfo.hasNextPage && ' · the oldest 50 shown'}
      </LivePageHead>
      {children.length === 0 ? (
        <p class="muted">No session was forked at event {seq} of this session.</p>
      ) : (
        <ol class="variants-grid" aria-label={`Children forked at event ${seq}`}>
          {children.map((c, i) => (
            <VariantCard key={c.id} child={c} index={i} compareWith={i > 0 ? first.id : undefined} live={live.get(c.id) ?? null} />
          ))}
        </ol>
      )}
    </main>
  );
}

/** What a variant is doing: running, failed (its own last turn), answered since the fork, or not yet. */
export function variantState(
  c: Pick<VariantFieldsFragment, 'status' | 'lastAnswer' | 'lastTurn' | 'firstLiveSeq'>,
): 'running' | 'failed' | 'answered' | 'waiting' {
  if (c.status === 'RUNNING') return 'running';
  if (c.lastTurn?.reason === 'failed' && isOwn(c)) return 'failed';
  return c.lastAnswer && !c.lastAnswer.inherited ? 'answered' : 'waiting';
}

/** The last turn is the child's own (it started after the fork's seed), not one inherited with the prefix. */
const isOwn = (c: Pick<VariantFieldsFragment, 'lastTurn' | 'firstLiveSeq'>) => !!c.lastTurn && c.lastTurn.startSeq >= c.firstLiveSeq;

/**
 * Each variant's text as it streams (sessionsTurns), until its answer is stored and read. Every card follows its
 * variant's turns from the first read of it (`afterSeq`: its last event then) for as long as the page is open,
 * whatever its state: a card that began to follow only once a read showed it running missed a short answer's text
 * (the read came after it had streamed). One subscription for the page's cards (at most 50), taken again from each
 * one's last seen event when a new variant appears.
 */
function useStreaming(children: readonly Pick<VariantFieldsFragment, 'id' | 'eventCount'>[]): ReadonlyMap<string, LiveStep> {
  const [live, setLive] = useState<ReadonlyMap<string, LiveStep>>(new Map());
  const seen = useRef(new Map<string, number>()).current; // from the first read of each: later reads must not move it
  for (const c of children) if (!seen.has(c.id)) seen.set(c.id, c.eventCount - 1);
  const ids = children.map((c) => c.id).join(' ');
  useEffect(() => {
    if (!ids) return;
    return followSessionsLiveSteps(ids.split(' '), seen, (id, change) =>
      setLive((all) => {
        const next = new Map(all);
        const step = change(all.get(id) ?? null);
        if (step) next.set(id, step);
        else next.delete(id);
        return next;
      }),
    ); // a card's state comes from the reads; streaming is extra
  }, [ids]);
  return live;
}

/** The last own turn's latency, tokens and cost: what variants are compared by besides their answers. */
function TurnFigures({ turn }: { turn: NonNullable<VariantFieldsFragment['lastTurn']> }) {
  return (
    <dl class="variant-figures" data-testid="variant-figures" aria-label={`Turn ${turn.turn} figures`}>
      <div>
        <dt>latency</dt>
        <dd>{turn.durationMs == null ? '–' : formatDuration(turn.durationMs)}</dd>
      </div>
      <div>
        <dt>tokens in</dt>
        <dd>{turn.usage ? turn.usage.inputTokens.toLocaleString('en-US') : '–'}</dd>
      </div>
      <div>
        <dt>tokens out</dt>
        <dd>{turn.usage ? turn.usage.outputTokens.toLocaleString('en-US') : '–'}</dd>
      </div>
      <div>
        <dt>cost</dt>
        <dd>{formatUsd(turn.usage?.costUsd)}</dd>
      </div>
    </dl>
  );
}

/**
 * Under a text the request's budget cut (docs/api.md "Texts in one request"): that it is cut, how long it is when
 * known, and a link to its event, which holds it whole.
 */
function CutNote({ id, seq, whole, testId }: { id: string; seq: number | null | undefined; whole?: number; testId: string }) {
  return (
    <span class="muted cut-note" data-testid={testId}>
      {' '}
      … cut here{whole === undefined ? '' : `: ${whole.toLocaleString('en-US')} characters in all`}
      {seq != null && (
        <>
          {' '}
          (<a href={eventPath(id, seq)}>event #{seq}</a>)
        </>
      )}
    </span>
  );
}

const STATE_TEXT = { running: 'running', failed: 'failed', answered: 'answered', waiting: 'no answer yet' };

function VariantCard({ child: c, index, compareWith, live }: { child: VariantFieldsFragment; index: number; compareWith?: string; live: LiveStep | null }) {
  const state = variantState(c);
  const answer = c.lastAnswer && !c.lastAnswer.inherited ? c.lastAnswer : null;
  return (
    <li class={`variant-card state-${state}`} data-session-id={c.id} data-state={state} data-testid="variant-card">
      <div class="variant-head">
        <a href={sessionPath(c.id)} class="variant-title" title={visibleText(c.title || c.id)}>
          {visibleText(c.title || c.id)}
        </a>
        <Badge tone={`variant-${state}`}>{STATE_TEXT[state]}</Badge>
      </div>
      {c.lastTurn?.input != null && isOwn(c) && (
        <div class="variant-input">
          <span class="muted">you:</span> <LongText text={c.lastTurn.input} id={`${c.id}:input:${c.lastTurn.inputSeq}`} class="inline-text" />
          {c.lastTurn.inputTruncated && <CutNote id={c.id} seq={c.lastTurn.inputSeq} testId="variant-input-cut" />}
        </div>
      )}
      {live && (live.text || live.tool) ? (
        <div class="variant-answer streaming" data-testid="variant-live" aria-live="polite">
          <div class="muted">
            turn {live.turn} step {live.step} · streaming{live.tool ? ` · running ${shownName(live.tool)}…` : ''}
          </div>
          {live.text && <LongText text={live.text} id={`${c.id}:live:${live.turn}:${live.step}`} />}
        </div>
      ) : state === 'failed' ? (
        <div class="variant-error" data-testid="variant-error">
          turn {c.lastTurn!.turn} failed
          {c.lastTurn!.error ? (
            <>
              : <LongText text={c.lastTurn!.error} id={`${c.id}:error:${c.lastTurn!.errorSeq}`} class="inline-text" />
            </>
          ) : (
            ''
          )}
          {c.lastTurn!.errorTruncated && <CutNote id={c.id} seq={c.lastTurn!.errorSeq} testId="variant-error-cut" />}
        </div>
      ) : answer ? (
        <div class="variant-answer" data-testid="variant-answer">
          <div class="muted">
            turn {answer.turn} step {answer.step} · #{answer.seq}
            {answer.toolCallCount > 0 && ` · ${answer.toolCallCount} tool call${answer.toolCallCount === 1 ? '' : 's'}`}
          </div>
          {answer.text ? (
            <LongText text={answer.text} id={`${c.id}:${answer.seq}`} />
          ) : (
            <div class="msg-text">{!answer.textTruncated && <span class="muted">(tool calls only)</span>}</div>
          )}
          {answer.textTruncated && (
            // A request reads a budget of answers' texts (docs/operations.md "Memory and time"): the whole answer is its event.
            <p>
              <CutNote id={c.id} seq={answer.seq} whole={answer.textLength} testId="variant-answer-cut" />
            </p>
          )}
        </div>
      ) : (
        <p class="muted">{state === 'running' ? 'Answering…' : 'It has not answered since the fork.'}</p>
      )}
      {c.lastTurn && isOwn(c) && c.lastTurn.reason && <TurnFigures turn={c.lastTurn} />}
      <div class="variant-meta muted">
        <span data-testid="variant-model">{c.model ? `${shownName(c.model.provider)}/${shownName(c.model.model)}` : 'default model'}</span>
        {' · '}
        {c.eventCount.toLocaleString('en-US')} events · {c.turnCount.toLocaleString('en-US')} turns
        {compareWith && (
          <>
            {' · '}
            <a href={diffPath(compareWith, c.id)}>compare with variant 1</a>
          </>
        )}
      </div>
      <span class="visually-hidden">variant {index + 1}</span>
    </li>
  );
}
