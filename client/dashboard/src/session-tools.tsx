// The tools a session's agent may be offered now (Session.tools: its last
// session/tools event, or every tool of its tenant; a runner session's: its
// runner's declared set, session/runner-tools), with each one's server and
// effect. Read when the page opens and again when either event arrives.
import { useEffect, useRef, useState } from 'preact/hooks';
import { SessionToolsDocument, ToolServersDocument, type ToolFieldsFragment, type ToolServersQuery } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import type { EventPages } from './event-pages.ts';
import { EffectBadge, errorText } from './widgets.tsx';
import { visibleText } from '../../../src/core/visible-text.ts';

export function SessionTools({ sessionId, pages, version }: { sessionId: string; pages: EventPages; version: number }) {
  const [tools, setTools] = useState<ToolFieldsFragment[] | null>(null);
  const [error, setError] = useState<string | null>(null);
  const [reads, setReads] = useState(0);
  // MCP servers that failed to start: named with their error, not silently missing from the list.
  const [failed, setFailed] = useState<ToolServersQuery['toolServers']>([]);
  useEffect(() => {
    let live = true;
    forkline.query(SessionToolsDocument, { id: sessionId }).then(
      (r) => live && (setTools(r.session?.tools ?? []), setError(null)),
      (err) => live && setError(errorText(err)),
    );
    forkline.query(ToolServersDocument, {}).then(
      (r) => live && setFailed(r.toolServers.filter((s) => s.status === 'FAILED')),
      () => {},
    );
    return () => {
      live = false;
    };
  }, [sessionId, reads]);

  // Only the events appended since the last look are checked (never the whole log).
  const seen = useRef({ sessionId, upTo: pages.length });
  useEffect(() => {
    const from = seen.current.sessionId === sessionId ? seen.current.upTo : pages.length;
    for (let seq = from; seq < pages.length; seq++) {
      const type = pages.get(seq)?.type;
      if (type === 'session/tools' || type === 'session/runner-tools') {
        setReads((n) => n + 1);
        break;
      }
    }
    seen.current = { sessionId, upTo: pages.length };
  }, [sessionId, pages, version]);

  // The summary line is there from the first render (the header keeps its height: the panes below do not move).
  const servers = [...new Set((tools ?? []).map((t) => t.server).filter((s): s is string => !!s))];
  return (
    <details class="session-tools" data-testid="session-tools">
      <summary>
        Tools {tools && <span class="muted">({tools.length})</span>}
        {servers.length > 0 && <span class="muted"> · MCP servers: {servers.join(', ')}</span>}
        {error && <span class="error-text"> · {error}</span>}
        {failed.length > 0 && <span class="error-text"> · not started: {failed.map((s) => s.name).join(', ')}</span>}
      </summary>
      {failed.map((s) => (
        <p key={s.name} class="error-text" data-testid="tool-server-failed" data-server={s.name}>
          MCP server <code>{s.name}</code> did not start: {s.error}
        </p>
      ))}
      {!tools ? (
        <p class="muted">{error ? 'The tools could not be read.' : 'Loading…'}</p>
      ) : tools.length === 0 ? (
        <p class="muted">This session's agent is offered no tools.</p>
      ) : (
        <div class="tools-scroll" tabIndex={0} role="region" aria-label="Session tools, scrollable">
          <table class="tools-table" aria-label="Session tools">
            <thead>
              <tr>
                <th>tool</th>
                <th>server</th>
                <th>effect</th>
              </tr>
            </thead>
            <tbody>
              {tools.map((t) => (
                <tr key={t.name} data-tool={t.name}>
                  <td>
                    <code title={t.description}>{visibleText(t.name)}</code>
                  </td>
                  <td class={t.server ? undefined : 'muted'}>{t.server ?? 'built-in'}</td>
                  <td>
                    <EffectBadge effect={t.effect} />
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </details>
  );
}
