// The sidebar's "Import recording": a file from the picker, posted as it is
// to POST /recordings (docs/api.md) with XMLHttpRequest, whose upload events
// give the bytes sent (a streamed fetch body has no progress, and Chromium
// streams one only over HTTP/2). Shows bytes sent of the total and the
// percent; Cancel aborts the request, and the server keeps nothing of it
// (its spool file goes, no session is written: src/http/recording-upload.ts).
import { useRef, useState } from 'preact/hooks';
import { SessionDocument, type SessionSummaryFragment } from '../../generated/graphql.ts';
import type { ImportProgress } from '@forkline/client';
import { ForklineClientError, forkline, tokens } from './api.ts';
import { navigate, sessionPath } from './router.ts';
import { errorText } from './widgets.tsx';
import './recording-import.css';

interface Progress {
  file: string;
  sent: number;
  total: number;
  /** Once the file is sent: how far the server's import got (bytes of the recording checked and written, and lines). */
  imported?: ImportProgress;
}

class Cancelled extends Error {}

type UploadAnswer = { session?: { id: string }; errors?: Array<{ message: string; extensions?: Record<string, unknown> }>; status?: number };

/** The JSON lines of a streamed answer received so far (the last may be partial: left out). */
const answerLines = (text: string) =>
  text
    .split('\n')
    .slice(0, -1)
    .filter(Boolean)
    .map((l) => JSON.parse(l) as UploadAnswer & { progress?: ImportProgress });

/**
 * Posts `file` to POST /recordings; `onProgress` gets the bytes sent, `onImport` the server's import progress
 * once they are all sent (a long import answers with JSON Lines of it, its outcome last); `signal` aborts it.
 * Resolves with the new session's id.
 */
function postRecording(
  file: Blob,
  onProgress: (sent: number, total: number) => void,
  onImport: (p: ImportProgress) => void,
  signal: AbortSignal,
): Promise<{ id: string }> {
  return new Promise((resolve, reject) => {
    const xhr = new XMLHttpRequest();
    xhr.open('POST', new URL('/recordings', location.href).toString());
    xhr.setRequestHeader('content-type', 'application/x-ndjson');
    xhr.setRequestHeader('accept', 'application/x-ndjson, application/json');
    const streamed = () => (xhr.getResponseHeader('content-type') ?? '').startsWith('application/x-ndjson');
    // The answer so far: its last whole progress line. Lines are short and few (4 a second).
    xhr.onprogress = () => {
      if (!streamed()) return;
      const last = answerLines(xhr.responseText).findLast((l) => l.progress);
      if (last?.progress) onImport(last.progress);
    };
    // A retry of this upload with the same key would get the same session (the server's idempotency keys).
    xhr.setRequestHeader('idempotency-key', crypto.randomUUID());
    if (tokens.stored) xhr.setRequestHeader('authorization', `Bearer ${tokens.stored}`);
    xhr.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : file.size);
    xhr.onload = () => {
      let body: UploadAnswer = {};
      try {
        body = streamed() ? (answerLines(`${xhr.responseText}\n`).findLast((l) => !l.progress) ?? {}) : JSON.parse(xhr.responseText);
      } catch {
        // not JSON: a proxy's page; the status says what happened
      }
      const status = body.status ?? xhr.status;
      if (status === 201 && body.session) resolve(body.session);
      else {
        const retryAfter = Number(xhr.getResponseHeader('retry-after')) || undefined;
        reject(new ForklineClientError(body.errors ?? [{ message: `HTTP ${status}` }], status, retryAfter));
      }
    };
    xhr.onerror = () => reject(new ForklineClientError([{ message: 'cannot reach the server' }]));
    xhr.onabort = () => reject(new Cancelled('cancelled'));
    signal.addEventListener('abort', () => xhr.abort(), { once: true });
    xhr.send(file);
  });
}

const MB = 1024 * 1024;
/** Bytes in the unit that reads best at this size. */
const byteText = (n: number) => (n >= MB ? `${(n / MB).toFixed(1)} MB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KB` : `${n.toLocaleString('en-US')} bytes`);
const percentOf = (p: Progress) => (p.total > 0 ? Math.floor((p.sent / p.total) * 100) : 0);
const importPercentOf = (p: ImportProgress) => (p.totalBytes > 0 ? Math.min(100, Math.floor((p.bytes / p.totalBytes) * 100)) : 0);

/**
 * A real button that opens a hidden file input, so Tab reaches it and Enter or
 * Space opens the picker (a label around a hidden input is not focusable);
 * while a file uploads, its progress and Cancel.
 */
export function ImportButton(props: { onImported(s: SessionSummaryFragment): void; onError(e: { file: string; message: string } | null): void }) {
  const input = useRef<HTMLInputElement>(null);
  const [progress, setProgress] = useState<Progress | null>(null);
  const [cancelled, setCancelled] = useState<string | null>(null);
  const abort = useRef<AbortController | null>(null);
  const onChange = async () => {
    const file = input.current?.files?.[0];
    if (!file) return;
    const controller = (abort.current = new AbortController());
    setProgress({ file: file.name, sent: 0, total: file.size });
    setCancelled(null);
    props.onError(null);
    try {
      const { id } = await postRecording(
        file,
        (sent, total) => setProgress({ file: file.name, sent, total }),
        (imported) => setProgress({ file: file.name, sent: file.size, total: file.size, imported }),
        controller.signal,
      );
      const { session } = await forkline.query(SessionDocument, { id });
      if (session) props.onImported(session);
      navigate(sessionPath(id));
    } catch (err) {
      if (err instanceof Cancelled) setCancelled(file.name);
      else props.onError({ file: file.name, message: errorText(err) });
    } finally {
      abort.current = null;
      setProgress(null);
      if (input.current) input.current.value = '';
    }
  };
  const busy = progress !== null;
  return (
    <>
      <button type="button" class={busy ? 'busy' : ''} disabled={busy} onClick={() => input.current?.click()}>
        {busy ? 'Importing…' : 'Import recording'}
      </button>
      <input ref={input} type="file" accept=".jsonl,.json,.txt,application/x-ndjson" onChange={onChange} data-testid="import-file" hidden />
      {progress && (
        <div
          class="import-progress"
          data-testid="import-progress"
          data-sent={progress.sent}
          data-total={progress.total}
          data-imported={progress.imported?.bytes}
        >
          <progress max={100} value={progress.imported ? importPercentOf(progress.imported) : percentOf(progress)} aria-label={`Import of ${progress.file}`} />
          <span class="import-figures" aria-live="polite">
            {progress.imported?.queued
              ? `${byteText(progress.total)} sent (100%); waiting for an import slot on the server…`
              : progress.imported
                ? `importing: ${byteText(progress.imported.bytes)} of ${byteText(progress.imported.totalBytes)} checked (${importPercentOf(progress.imported)}%), ${Math.max(0, progress.imported.lines - 1).toLocaleString('en-US')} lines`
                : progress.sent < progress.total
                  ? `${byteText(progress.sent)} of ${byteText(progress.total)} (${percentOf(progress)}%)`
                  : `${byteText(progress.total)} sent (100%); importing…`}
          </span>
          <button type="button" class="small" onClick={() => abort.current?.abort()}>
            Cancel import
          </button>
        </div>
      )}
      {cancelled && (
        <p class="import-cancelled muted" role="status" data-testid="import-cancelled">
          Import of {cancelled} cancelled: nothing was imported.
        </p>
      )}
    </>
  );
}
