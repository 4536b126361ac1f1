// Modal dialogs: "New session" (title and model) and the token question (the
// fork, branch, edit and fan-out dialog is branch-dialog.tsx). Built on
// <dialog>.showModal(), so focus moves into the dialog, Tab stays in it and
// Escape closes it without extra code.
import type { ComponentChildren } from 'preact';
import { useEffect, useLayoutEffect, useRef, useState } from 'preact/hooks';
import { DashboardModelsDocument, type DashboardModelsQuery } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import { errorText } from './widgets.tsx';

export function Modal(props: {
  title: string;
  onClose(): void;
  onSubmit(): void;
  busy: boolean;
  error: string | null;
  submitLabel: string;
  /** null: no cancel button (a dialog that only reports; Escape still closes it). */
  cancelLabel?: string | null;
  /** A click on the backdrop closes it, like Escape (a dialog with nothing typed to lose). */
  closeOnBackdrop?: boolean;
  children: ComponentChildren;
}) {
  const ref = useRef<HTMLDialogElement>(null);
  // Closed (Escape, Cancel or done), the focus goes back to what opened the dialog, not to <body>. Taken
  // while rendering: the opener may be disabled while the dialog is open, which drops its focus.
  const [opener] = useState(() => (document.activeElement instanceof HTMLElement ? document.activeElement : null));
  // A layout effect: its cleanup runs as the dialog leaves the page, not a frame later (a passive one's waits for the
  // paint), so no key or click lands while the focus is on <body>. The focus moves in a microtask: once the render that
  // closed the dialog (and re-enabled the opener) is done, before anything else happens on the page.
  useLayoutEffect(() => {
    ref.current?.showModal();
    return () => queueMicrotask(() => opener?.isConnected && opener.focus());
  }, []);
  return (
    <dialog
      ref={ref}
      class="modal"
      aria-label={props.title}
      onClose={props.onClose}
      // The form fills the dialog (no padding of its own): a click on the dialog itself is on its backdrop.
      onClick={(e) => props.closeOnBackdrop && e.target === ref.current && ref.current?.close()}
    >
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
          {props.cancelLabel !== null && (
            <button type="button" onClick={() => ref.current?.close()}>
              {props.cancelLabel ?? 'Cancel'}
            </button>
          )}
          <button type="submit" class="primary" disabled={props.busy}>
            {props.busy ? 'Working…' : props.submitLabel}
          </button>
        </div>
      </form>
    </dialog>
  );
}

/** Runs `action`, keeping the dialog open with its error when it fails. */
export function useSubmit(action: () => Promise<void>) {
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

export type Catalog = DashboardModelsQuery['models'];

/** The providers and model names the server offers (`models`), read once per dialog. */
export function useModelCatalog(onLoad?: (catalog: Catalog) => void) {
  const [catalog, setCatalog] = useState<Catalog | null>(null);
  const [loadError, setLoadError] = useState<string | null>(null);
  useEffect(() => {
    forkline
      .query(DashboardModelsDocument, {})
      .then(({ models }) => {
        setCatalog(models);
        onLoad?.(models);
      })
      .catch((err) => setLoadError(errorText(err)));
  }, []);
  return { catalog, loadError };
}

export interface NewSessionChoice {
  title: string;
  model: { provider: string; model: string };
}

/** Title and model of a new session; the models are what the server's `models` query offers. */
export function NewSessionDialog(props: { onCreate(choice: NewSessionChoice): Promise<void>; onClose(): void }) {
  const [title, setTitle] = useState('');
  const [provider, setProvider] = useState('');
  const [model, setModel] = useState('');
  const { catalog, loadError } = useModelCatalog((models) => {
    setProvider(models.defaultProvider);
    setModel(models.defaultModel);
  });
  const known = catalog?.providers.find((p) => p.name === provider)?.models ?? [];
  const { busy, error, submit } = useSubmit(() => props.onCreate({ title: title.trim(), model: { provider, model: model.trim() } }));
  return (
    <Modal
      title="New session"
      submitLabel="Create"
      busy={busy || !catalog || !model.trim()}
      error={error ?? loadError}
      onClose={props.onClose}
      onSubmit={submit}
    >
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

/** The last characters of a token: enough to tell two apart, too few to use. */
const tokenTail = (token: string) => `…${token.slice(-4)}`;

/**
 * A `?token=` link whose token differs from the one this browser keeps: asked
 * before it replaces it, since a link can carry another tenant's token (the
 * dashboard would then show that tenant's sessions and act as it).
 */
export function ReplaceTokenDialog(props: { stored: string; offered: string; onReplace(): void; onKeep(): void }) {
  return (
    <Modal
      title="Replace the stored API token?"
      submitLabel="Use the link's token"
      cancelLabel="Keep my token"
      busy={false}
      error={null}
      onClose={props.onKeep}
      onSubmit={props.onReplace}
    >
      <p>
        This link carries an API token ({tokenTail(props.offered)}) that differs from the one this browser uses ({tokenTail(props.stored)}). A token decides
        which tenant's sessions you see and act on: replace yours only if you trust where the link came from.
      </p>
    </Modal>
  );
}
