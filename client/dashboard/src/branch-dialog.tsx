// The one dialog behind every way to make children from the UI: fork at an
// event, branch from a turn's end, edit a user message and re-run. Each takes
// a message and a model (the model in force at the cut when left unchanged);
// "Add variant" turns it into a fan-out: one child per variant, all at the
// same cut (fanOut), opened side by side (fork-point-page.tsx).
import { useState } from 'preact/hooks';
import {
  BranchSessionDocument,
  EditMessageDocument,
  FanOutDocument,
  ForkSessionDocument,
  type ModelConfigInput,
  type SessionSummaryFragment,
} from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { takenUnstartedText } from './conversation.ts';
import type { TakenInput } from '../../../src/core/taken-inputs.ts';
import { Modal, useModelCatalog, useSubmit, type Catalog } from './dialogs.tsx';
import './fork-family.css';

/** What the children are made from. */
export type ChildRequest =
  /** An exact fork at event `seq` (`takenUnstarted`: inputs the cut leaves taken but unstarted). */
  | { kind: 'fork'; seq: number; takenUnstarted?: readonly TakenInput[] }
  /** A branch through the end of turn `turn` (event `seq`). */
  | { kind: 'branch'; seq: number; turn: number }
  /** Edit and re-run the user input `inputId` (its inbox/add is event `seq`): the child forks right before it. */
  | { kind: 'edit'; seq: number; inputId: string; text: string };

/** What the dialog made: one child (opened), or a fan-out's children at `cutSeq` (shown side by side). */
export type ChildrenMade = { kind: 'one'; child: SessionSummaryFragment } | { kind: 'fan-out'; cutSeq: number; children: SessionSummaryFragment[] };

export const childTitle = (parentTitle: string | null | undefined, seq: number) => `${parentTitle || 'Untitled'} · fork @${seq}`;

/** Most variants one fan-out takes (fanOut refuses more). */
export const MAX_VARIANTS = 16;

interface Variant {
  message: string;
  /** '': the model in force at the cut. */
  provider: string;
  model: string;
}

const headingOf = (r: ChildRequest) =>
  r.kind === 'fork' ? `Fork at event ${r.seq}` : r.kind === 'branch' ? `Branch from turn ${r.turn}` : `Edit message #${r.seq}`;

const modelOf = (v: Variant): ModelConfigInput | null => (v.provider && v.model.trim() ? { provider: v.provider, model: v.model.trim() } : null);

/** Makes the children: one through forkSession, branchSession or editMessage; several through one fanOut. */
async function makeChildren(sessionId: string, request: ChildRequest, title: string, variants: Variant[]): Promise<ChildrenMade> {
  const text = (v: Variant) => v.message.trim() || null;
  if (variants.length === 1) {
    const [v] = variants;
    const base = { sessionId, title: title || null, model: modelOf(v) };
    if (request.kind === 'edit')
      return {
        kind: 'one',
        child: (await forkline.mutate(EditMessageDocument, { input: { ...base, inputId: request.inputId, text: v.message } })).editMessage.session,
      };
    if (request.kind === 'fork')
      return {
        kind: 'one',
        child: (await forkline.mutate(ForkSessionDocument, { input: { ...base, atSeq: request.seq, message: text(v) } })).forkSession.session,
      };
    return {
      kind: 'one',
      child: (await forkline.mutate(BranchSessionDocument, { input: { ...base, anchorSeq: request.seq, message: text(v) } })).branchSession.session,
    };
  }
  // An edit's variants fork where editMessage would: right before the input's inbox/add.
  const cut = request.kind === 'branch' ? { anchorSeq: request.seq } : { atSeq: request.kind === 'edit' ? request.seq - 1 : request.seq };
  const { fanOut } = await forkline.mutate(FanOutDocument, {
    input: {
      sessionId,
      ...cut,
      variants: variants.map((v, i) => ({ message: text(v), model: modelOf(v), title: `${title || 'Untitled'} · variant ${i + 1}` })),
    },
  });
  return { kind: 'fan-out', cutSeq: fanOut.cutSeq, children: fanOut.children };
}

export function BranchDialog(props: {
  sessionId: string;
  request: ChildRequest;
  parentTitle: string | null | undefined;
  onMade(made: ChildrenMade): void;
  onClose(): void;
}) {
  const { request } = props;
  const edit = request.kind === 'edit';
  const [title, setTitle] = useState(() => childTitle(props.parentTitle, edit ? request.seq - 1 : request.seq));
  const [variants, setVariants] = useState<Variant[]>(() => [{ message: edit ? request.text : '', provider: '', model: '' }]);
  const { catalog, loadError } = useModelCatalog();
  const fanOut = variants.length > 1;
  // An edit needs its text; an edit of the log's first event has no seq to fork a fan-out at.
  const missingText = edit && variants.some((v) => !v.message.trim());
  const canFanOut = variants.length < MAX_VARIANTS && !(edit && request.seq === 0);
  const { busy, error, submit } = useSubmit(async () => props.onMade(await makeChildren(props.sessionId, request, title.trim(), variants)));
  const change = (i: number, patch: Partial<Variant>) => setVariants((vs) => vs.map((v, j) => (j === i ? { ...v, ...patch } : v)));
  const submitLabel = fanOut ? `Fan out (${variants.length})` : edit ? 'Edit and re-run' : request.kind === 'fork' ? 'Fork' : 'Branch';
  return (
    <Modal title={headingOf(request)} submitLabel={submitLabel} busy={busy || missingText} error={error ?? loadError} onClose={props.onClose} onSubmit={submit}>
      <p class="muted">
        {request.kind === 'fork'
          ? `The new session inherits events 0–${request.seq}; repair closes what is open at the cut.`
          : request.kind === 'branch'
            ? `The new session inherits the log through this turn's end (event ${request.seq}).`
            : `The new session inherits the log before this message (events 0–${request.seq - 1}) and re-runs from your edited text. This session is not changed.`}
        {fanOut && ` Fan-out: one session per variant, all at the same cut, shown side by side.`}
      </p>
      {request.kind === 'fork' &&
        request.takenUnstarted?.map((u) => (
          <p key={u.inputId} class="fork-unanswered-note" data-testid="fork-taken-note">
            {takenUnstartedText(u, fanOut ? 'the new sessions' : 'the new session')}{' '}
            {u.text && (
              <button type="button" class="small" onClick={() => setVariants((vs) => vs.map((v) => (v.message.trim() ? v : { ...v, message: u.text })))}>
                Send it again in the fork
              </button>
            )}
          </p>
        ))}
      <label class="field">
        {fanOut ? 'Title of the new sessions (each adds "· variant N")' : 'Title of the new session'}
        <input value={title} onInput={(e) => setTitle(e.currentTarget.value)} maxLength={200} autoFocus onFocus={(e) => e.currentTarget.select()} />
      </label>
      <div class="variants">
        {variants.map((v, i) => (
          <VariantFields
            key={i}
            index={i}
            variant={v}
            catalog={catalog}
            messageLabel={
              edit ? 'Edited message' : request.kind === 'fork' ? 'Message to send in the fork (optional)' : 'Message to send in the branch (optional)'
            }
            fanOut={fanOut}
            onChange={(patch) => change(i, patch)}
            onRemove={fanOut ? () => setVariants((vs) => vs.filter((_, j) => j !== i)) : undefined}
          />
        ))}
      </div>
      <button
        type="button"
        class="small"
        disabled={!canFanOut}
        title="Fan out: several children at the same cut, each with its own message and/or model"
        onClick={() => setVariants((vs) => [...vs, { ...vs[vs.length - 1] }])}
      >
        Add variant
      </button>
    </Modal>
  );
}

function VariantFields(props: {
  index: number;
  variant: Variant;
  catalog: Catalog | null;
  messageLabel: string;
  fanOut: boolean;
  onChange(patch: Partial<Variant>): void;
  onRemove?: () => void;
}) {
  const { variant: v, index } = props;
  const name = props.fanOut ? `Variant ${index + 1}` : 'The new session';
  const known = props.catalog?.providers.find((p) => p.name === v.provider)?.models ?? [];
  const listId = `variant-models-${index}`;
  return (
    <fieldset class="variant" data-testid="variant">
      <legend>{name}</legend>
      <label class="field">
        {props.messageLabel}
        <textarea
          rows={2}
          value={v.message}
          onInput={(e) => props.onChange({ message: e.currentTarget.value })}
          aria-label={props.fanOut ? `${props.messageLabel}, variant ${index + 1}` : undefined}
        />
      </label>
      <div class="variant-model">
        <label class="field">
          Provider
          <select
            value={v.provider}
            aria-label={props.fanOut ? `Provider, variant ${index + 1}` : undefined}
            onChange={(e) => {
              const provider = e.currentTarget.value;
              props.onChange({ provider, model: props.catalog?.providers.find((p) => p.name === provider)?.models[0] ?? '' });
            }}
          >
            <option value="">unchanged (the model at the cut)</option>
            {props.catalog?.providers.map((p) => (
              <option key={p.name} value={p.name}>
                {p.name}
              </option>
            ))}
          </select>
        </label>
        <label class="field">
          Model
          <input
            value={v.model}
            list={listId}
            disabled={!v.provider}
            placeholder={v.provider ? 'model name' : 'unchanged'}
            aria-label={props.fanOut ? `Model, variant ${index + 1}` : undefined}
            onInput={(e) => props.onChange({ model: e.currentTarget.value })}
          />
          <datalist id={listId}>
            {known.map((m) => (
              <option key={m} value={m} />
            ))}
          </datalist>
        </label>
      </div>
      {props.onRemove && (
        <button type="button" class="small" onClick={props.onRemove}>
          Remove variant {index + 1}
        </button>
      )}
    </fieldset>
  );
}
