// Modal dialogs: "New session" (title and model) and the fork/branch dialog
// that names the child. Built on <dialog>.showModal(), so focus moves into the
// dialog, Tab stays in it and Escape closes it without extra code.
import type { ComponentChildren } from 'preact';
import { useEffect, useRef, useState } from 'preact/hooks';
import { DashboardModelsDocument, type DashboardModelsQuery } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { errorText } from './widgets.tsx';

function Modal(props: { title: string; onClose(): void; onSubmit(): void; busy: boolean; error: string | null; submitLabel: string; cancelLabel?: string; children: ComponentChildren }) {
  const ref = useRef<HTMLDialogElement>(null);
  useEffect(() => {
    ref.current?.showModal();
  }, []);
  return (
    <dialog ref={ref} class="modal" aria-label={props.title} onClose={props.onClose}>
      <form
        method="dialog"
        onSubmit={(e) => {
          e.preventDefault();
          props.onSubmit();
        }}
      >
        <h2 class="modal-title">{props.title}</h2>
        {props.children}
        {props.error && (
          <p class="error" role="alert">
            {props.error}
          </p>
        )}
        <div class="modal-actions">
          <button type="button" onClick={() => ref.current?.close()}>
            {props.cancelLabel ?? 'Cancel'}
          </button>
          <button type="submit" class="primary" disabled={props.busy}>
            {props.busy ? 'Working…' : props.submitLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}

/** Runs `action`, keeping the dialog open with its error when it fails. */
function useSubmit(action: () => Promise<void>) {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const submit = async () => {
    setBusy(true);
    setError(null);
    try {
      await action();
    } catch (err) {
      setError(errorText(err));
      setBusy(false);
    }
  };
  return { busy, error, submit };
}

type Catalog = DashboardModelsQuery['models'];

export interface NewSessionChoice {
  title: string;
  model: { provider: string; model: string };
}

/** Title and model of a new session; the models are what the server's `models` query offers. */
export function NewSessionDialog(props: { onCreate(choice: NewSessionChoice): Promise<void>; onClose(): void }) {
  const [catalog, setCatalog] = useState<Catalog | null>(null);
  const [title, setTitle] = useState('');
  const [provider, setProvider] = useState('');
  const [model, setModel] = useState('');
  const [loadError, setLoadError] = useState<string | null>(null);
  useEffect(() => {
    forkline
      .query(DashboardModelsDocument, {})
      .then(({ models }) => {
        setCatalog(models);
        setProvider(models.defaultProvider);
        setModel(models.defaultModel);
      })
      .catch((err) => setLoadError(errorText(err)));
  }, []);
  const known = catalog?.providers.find((p) => p.name === provider)?.models ?? [];
  const { busy, error, submit } = useSubmit(() => props.onCreate({ title: title.trim(), model: { provider, model: model.trim() } }));
  return (
    <Modal title="New session" submitLabel="Create" busy={busy || !catalog || !model.trim()} error={error ?? loadError} onClose={props.onClose} onSubmit={submit}>
      <label class="field">
        Title
        <input value={title} onInput={(e) => setTitle(e.currentTarget.value)} placeholder="Untitled" maxLength={200} autoFocus />
      </label>
      <label class="field">
        Provider
        <select
          value={provider}
          disabled={!catalog}
          onChange={(e) => {
            const next = e.currentTarget.value;
            setProvider(next);
            // A provider's own model when it names one; else free text.
            setModel(catalog?.providers.find((p) => p.name === next)?.models[0] ?? '');
          }}
        >
          {catalog?.providers.map((p) => (
            <option key={p.name} value={p.name}>
              {p.name}
              {p.isDefault ? ' (default)' : ''}
            </option>
          ))}
        </select>
      </label>
      <label class="field">
        Model
        <input value={model} list="known-models" onInput={(e) => setModel(e.currentTarget.value)} placeholder="model name" required />
        <datalist id="known-models">
          {known.map((m) => (
            <option key={m} value={m} />
          ))}
        </datalist>
      </label>
    </Modal>
  );
}

/** A fork (`kind` fork, at an event) or branch (through a turn's end) about to be made. */
export interface ChildRequest {
  kind: 'fork' | 'branch';
  seq: number;
  turn?: number;
}

export const childTitle = (parentTitle: string | null | undefined, seq: number) => `${parentTitle || 'Untitled'} · fork @${seq}`;

/** Names the child before it is made: forks no longer all inherit the parent's title. */
export function ChildDialog(props: { request: ChildRequest; parentTitle: string | null | undefined; onCreate(title: string): Promise<void>; onClose(): void }) {
  const { request } = props;
  const [title, setTitle] = useState(() => childTitle(props.parentTitle, request.seq));
  const { busy, error, submit } = useSubmit(() => props.onCreate(title.trim()));
  const heading = request.kind === 'fork' ? `Fork at event ${request.seq}` : `Branch from turn ${request.turn ?? '?'}`;
  return (
    <Modal title={heading} submitLabel={request.kind === 'fork' ? 'Fork' : 'Branch'} busy={busy} error={error} onClose={props.onClose} onSubmit={submit}>
      <p class="muted">
        {request.kind === 'fork'
          ? `The new session inherits events 0–${request.seq}; repair closes what is open at the cut.`
          : `The new session inherits the log through this turn's end (event ${request.seq}).`}
      </p>
      <label class="field">
        Title of the new session
        <input value={title} onInput={(e) => setTitle(e.currentTarget.value)} maxLength={200} autoFocus onFocus={(e) => e.currentTarget.select()} />
      </label>
    </Modal>
  );
}

/** The last characters of a token: enough to tell two apart, too few to use. */
const tokenTail = (token: string) => `…${token.slice(-4)}`;

/**
 * A `?token=` link whose token differs from the one this browser keeps: asked
 * before it replaces it, since a link can carry another tenant's token (the
 * dashboard would then show that tenant's sessions and act as it).
 */
export function ReplaceTokenDialog(props: { stored: string; offered: string; onReplace(): void; onKeep(): void }) {
  return (
    <Modal title="Replace the stored API token?" submitLabel="Use the link's token" cancelLabel="Keep my token" busy={false} error={null} onClose={props.onKeep} onSubmit={props.onReplace}>
      <p>
        This link carries an API token ({tokenTail(props.offered)}) that differs from the one this browser uses ({tokenTail(props.stored)}).
        A token decides which tenant's sessions you see and act on: replace yours only if you trust where the link came from.
      </p>
    </Modal>
  );
}
