// Export a session's recording with progress: streamed from GET /recordings
// (the server reads the log page by page as the download goes), lines counted
// as they arrive against the event count the server announced, then saved as
// a file. The file is assembled from the chunks as they came (a Blob of
// parts), never decoded into one string.
import { useState } from 'preact/hooks';
import { eventLines, newlines, percentOf } from '../../recording-stream.ts';
import { forkline } from './api.ts';
import { errorText } from './widgets.tsx';

/** Reads `body` to its end, calling `progress` with the number of event lines read so far (the header line not counted). */
export async function readWithProgress(body: ReadableStream<Uint8Array>, progress: (lines: number) => void): Promise<Uint8Array[]> {
  const parts: Uint8Array[] = [];
  let lines = 0;
  const reader = body.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    lines += newlines(value);
    progress(eventLines(lines));
  }
  return parts;
}

export function ExportButton({ sessionId, fileName, busy, onError }: { sessionId: string; fileName: string; busy: boolean; onError(msg: string): void }) {
  const [percent, setPercent] = useState<number | null>(null);
  const run = async () => {
    setPercent(0);
    try {
      const { eventCount, body } = await forkline.downloadRecording(sessionId);
      let shown = 0;
      const parts = await readWithProgress(body, (lines) => {
        const p = percentOf(lines, eventCount);
        if (p !== shown) setPercent((shown = p));
      });
      const url = URL.createObjectURL(new Blob(parts as BlobPart[], { type: 'application/x-ndjson' }));
      const a = Object.assign(document.createElement('a'), { href: url, download: fileName });
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    } catch (err) {
      onError(errorText(err));
    } finally {
      setPercent(null);
    }
  };
  const exporting = percent !== null;
  return (
    <button type="button" onClick={run} disabled={busy || exporting} data-testid="export-recording" aria-live="polite">
      {exporting ? `Exporting… ${percent}%` : 'Export recording'}
      {exporting && <progress class="export-progress" max={100} value={percent} aria-label="Export progress" />}
    </button>
  );
}
