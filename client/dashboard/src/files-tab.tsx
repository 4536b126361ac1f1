// The session page's Files tab (docs/files.md): the session's file workspace
// as of any event — its tree, a viewer (text; a binary file as its size and
// hash), and what changed against the parent at the fork's cut or since
// another event (Session.files, Session.file, Session.fileChanges). Nothing
// runs to answer these: the server reads the log and its stored contents.
//
// A link into the tab (from a tool call that changed files) is the page's
// hash, `#files-<seq>:<path>`, so it can be shared and survives a reload.
import { useEffect, useMemo, useState } from 'preact/hooks';
import type { ComponentChildren } from 'preact';
import { SessionFileChangesDocument, SessionFileDocument, SessionFilesDocument, type FileEntryFieldsFragment } from '../../generated/graphql.ts';
import { forkline } from './api.ts';
import type { ToolCallView } from './conversation.ts';
import { Badge, errorText } from './widgets.tsx';
import './files-tab.css';
import { visibleLines, visibleText } from '../../../src/core/visible-text.ts';

type Entry = FileEntryFieldsFragment;
type Change = { path: string; kind: 'ADDED' | 'CHANGED' | 'DELETED'; diff?: string | null; before?: Entry | null; after?: Entry | null };

/** Where a link into the tab points: an event and, optionally, a file. `nonce` tells two clicks on one link apart. */
export interface FilesTarget {
  seq: number;
  path?: string;
  nonce: number;
}

const HASH = /^#files-(\d+)(?::(.*))?$/;
export const filesHash = (seq: number, path?: string) => `#files-${seq}${path ? `:${encodeURIComponent(path)}` : ''}`;

let nonce = 0;
function targetOfHash(): FilesTarget | null {
  const m = HASH.exec(location.hash);
  return m ? { seq: Number(m[1]), path: m[2] === undefined ? undefined : decodeURIComponent(m[2]), nonce: ++nonce } : null;
}

const FILES_OPENED = 'forkline:files-opened';

/** Opens the Files tab at an event (and a file): the address says so, for Back and for sharing. */
export function openFiles(seq: number, path?: string) {
  history.pushState(null, '', `${location.pathname}${location.search}${filesHash(seq, path)}`);
  dispatchEvent(new Event(FILES_OPENED));
}

/** The link target in the address, following pasted links, Back/Forward and openFiles. */
function useFilesTarget(): FilesTarget | null {
  const [target, setTarget] = useState(targetOfHash);
  useEffect(() => {
    const update = () => setTarget(targetOfHash());
    for (const e of [FILES_OPENED, 'hashchange', 'popstate']) addEventListener(e, update);
    return () => {
      for (const e of [FILES_OPENED, 'hashchange', 'popstate']) removeEventListener(e, update);
    };
  }, []);
  return target;
}

export interface FilesSession {
  id: string;
  /** Events in the log (the tab's latest event is length - 1). */
  length: number;
  /** For a fork: the parent's event it was cut at (its files are the parent's as of then). */
  forkedAtSeq?: number | null;
  parentId?: string | null;
}

/**
 * The events pane's two tabs: the events (`children`) and the files. A link
 * into the files (`#files-…`) switches to them; going back to the events
 * drops it from the address.
 */
export function EventsAndFiles({ session, children }: { session: FilesSession; children: ComponentChildren }) {
  const target = useFilesTarget();
  const [tab, setTab] = useState<'events' | 'files'>(target ? 'files' : 'events');
  useEffect(() => {
    if (target) setTab('files');
  }, [target]);
  const showEvents = () => {
    setTab('events');
    if (HASH.test(location.hash)) history.replaceState(null, '', `${location.pathname}${location.search}`);
  };
  return (
    <>
      <div class="pane-tabs" role="tablist" aria-label="Events or files">
        <button type="button" role="tab" aria-selected={tab === 'events'} onClick={showEvents}>
          Events
        </button>
        <button type="button" role="tab" aria-selected={tab === 'files'} onClick={() => setTab('files')}>
          Files
        </button>
      </div>
      {tab === 'events' ? children : <FilesPane key={session.id} session={session} target={target} />}
    </>
  );
}

type CompareWith = 'none' | 'cut' | 'event';

function FilesPane({ session, target }: { session: FilesSession; target: FilesTarget | null }) {
  const isFork = session.forkedAtSeq != null && session.parentId != null;
  const [pinned, setPinned] = useState<number | null>(target?.seq ?? null);
  const [selected, setSelected] = useState<string | null>(target?.path ?? null);
  const [compare, setCompare] = useState<CompareWith>(isFork ? 'cut' : 'none');
  const [fromSeq, setFromSeq] = useState(0);
  useEffect(() => {
    if (!target) return;
    setPinned(target.seq);
    if (target.path !== undefined) setSelected(target.path);
  }, [target?.nonce]);

  const last = session.length - 1;
  const at = pinned === null ? last : Math.min(pinned, last);
  const from = compare === 'cut' ? (session.forkedAtSeq ?? -1) : compare === 'event' ? fromSeq : null;
  const { files, changes, error } = useFilesAt(session.id, at, from);
  const changeOf = useMemo(() => new Map((changes ?? []).map((c) => [c.path, c])), [changes]);

  return (
    <div class="files-pane" data-testid="files-pane" data-at-seq={at}>
      <div class="files-bar">
        <label>
          at event{' '}
          <input
            type="number"
            min={0}
            max={Math.max(0, last)}
            value={at}
            aria-label="Files at event"
            onInput={(e) => {
              const n = Number(e.currentTarget.value);
              if (Number.isInteger(n) && n >= 0) setPinned(Math.min(n, last));
            }}
          />
        </label>
        <button type="button" class="small" onClick={() => setPinned(null)} disabled={pinned === null}>
          Latest
        </button>
        <label>
          compare with{' '}
          <select aria-label="Compare files with" value={compare} onChange={(e) => setCompare(e.currentTarget.value as CompareWith)}>
            <option value="none">nothing</option>
            {isFork && <option value="cut">the parent at the cut (#{session.forkedAtSeq})</option>}
            <option value="event">an earlier event</option>
          </select>
        </label>
        {compare === 'event' && (
          <input
            type="number"
            min={-1}
            max={Math.max(0, last)}
            value={fromSeq}
            aria-label="Compare from event"
            onInput={(e) => {
              const n = Number(e.currentTarget.value);
              if (Number.isInteger(n) && n >= -1) setFromSeq(Math.min(n, last));
            }}
          />
        )}
      </div>
      {error && (
        <p class="error" role="alert">
          {error}
        </p>
      )}
      {from !== null && changes && (
        <div class="file-changes" data-testid="file-changes">
          <span class="muted">
            {changes.length === 0 ? 'No file changed' : `${changes.length} changed`} between #{from} and #{at}
            {compare === 'cut' ? ' (the parent at the cut → this fork)' : ''}
          </span>
          <ul aria-label="Changed files">
            {changes.map((c) => (
              <li key={c.path} data-kind={c.kind}>
                <button type="button" class="link" onClick={() => setSelected(c.path)} aria-current={selected === c.path}>
                  <KindBadge kind={c.kind} /> {visibleText(c.path)}
                </button>
              </li>
            ))}
          </ul>
        </div>
      )}
      <div class="files-body">
        <nav class="file-tree" aria-label="File tree">
          {files === undefined ? (
            <p class="muted">Loading…</p>
          ) : files.length === 0 ? (
            <p class="muted">No files at event #{at}.</p>
          ) : (
            <TreeLevel node={treeOf(files)} selected={selected} changeOf={changeOf} onSelect={setSelected} />
          )}
        </nav>
        <section class="file-viewer" aria-label="File viewer">
          {selected === null ? (
            <p class="muted">Pick a file to see it as of event #{at}.</p>
          ) : (
            <FileView sessionId={session.id} path={selected} at={at} change={changeOf.get(selected)} from={from} />
          )}
        </section>
      </div>
    </div>
  );
}

/** The tree as of `at`, and what changed since `from` (null: no comparison). */
function useFilesAt(id: string, at: number, from: number | null) {
  const [files, setFiles] = useState<Entry[] | undefined>(undefined);
  const [changes, setChanges] = useState<Change[] | undefined>(undefined);
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    if (at < 0) return setFiles([]);
    let stale = false;
    forkline
      .query(SessionFilesDocument, { id, atSeq: at })
      .then((r) => !stale && (setFiles(r.session?.files ?? []), setError(null)))
      .catch((err) => !stale && setError(errorText(err)));
    return () => void (stale = true);
  }, [id, at]);
  useEffect(() => {
    setChanges(undefined);
    if (from === null || at < 0) return;
    let stale = false;
    forkline
      .query(SessionFileChangesDocument, { id, fromSeq: from, toSeq: at })
      .then((r) => !stale && setChanges((r.session?.fileChanges ?? []) as Change[]))
      .catch((err) => !stale && setError(errorText(err)));
    return () => void (stale = true);
  }, [id, at, from]);
  return { files, changes, error };
}

interface TreeNode {
  dirs: Map<string, TreeNode>;
  files: Entry[];
}

function treeOf(entries: readonly Entry[]): TreeNode {
  const root: TreeNode = { dirs: new Map(), files: [] };
  for (const e of entries) {
    const parts = e.path.split('/');
    let node = root;
    for (const dir of parts.slice(0, -1)) {
      let next = node.dirs.get(dir);
      if (!next) node.dirs.set(dir, (next = { dirs: new Map(), files: [] }));
      node = next;
    }
    node.files.push(e);
  }
  return root;
}

function TreeLevel(props: { node: TreeNode; selected: string | null; changeOf: Map<string, Change>; onSelect(path: string): void }) {
  const { node, selected, changeOf, onSelect } = props;
  return (
    <ul>
      {[...node.dirs].map(([name, child]) => (
        <li key={`d:${name}`}>
          <details open>
            <summary>{visibleText(name)}/</summary>
            <TreeLevel {...props} node={child} />
          </details>
        </li>
      ))}
      {node.files.map((f) => {
        const change = changeOf.get(f.path);
        return (
          <li key={f.path}>
            <button type="button" class="file-node" data-path={f.path} aria-current={selected === f.path} onClick={() => onSelect(f.path)}>
              <span class="file-name">{visibleText(f.path.split('/').pop()!)}</span>
              {change && <KindBadge kind={change.kind} />}
              <span class="muted">{formatBytes(f.size)}</span>
            </button>
          </li>
        );
      })}
    </ul>
  );
}

const KIND_LABELS = { ADDED: 'added', CHANGED: 'changed', DELETED: 'deleted' } as const;
const KindBadge = ({ kind }: { kind: Change['kind'] }) => <Badge tone={`file-kind kind-${kind.toLowerCase()}`}>{KIND_LABELS[kind]}</Badge>;

function FileView({ sessionId, path, at, change, from }: { sessionId: string; path: string; at: number; change?: Change; from: number | null }) {
  const [file, setFile] = useState<{ path: string; size: number; hash: string; seq: number; text?: string | null; base64?: string | null } | null | undefined>(
    undefined,
  );
  const [error, setError] = useState<string | null>(null);
  useEffect(() => {
    let stale = false;
    setFile(undefined);
    forkline
      .query(SessionFileDocument, { id: sessionId, path, atSeq: at })
      .then((r) => !stale && (setFile(r.session?.file ?? null), setError(null)))
      .catch((err) => !stale && setError(errorText(err)));
    return () => void (stale = true);
  }, [sessionId, path, at]);
  return (
    <div class="file-view" data-testid="file-view" data-path={path}>
      <div class="file-head">
        <code>{visibleText(path)}</code>
        {file && (
          <span class="muted">
            {formatBytes(file.size)} · sha-256 <span title={file.hash}>{file.hash.slice(0, 12)}…</span> · written by the call answered at #{file.seq + 1}
          </span>
        )}
      </div>
      {error && <p class="error">{error}</p>}
      {change && from !== null && (
        <div class="file-diff-block">
          <div class="muted">
            <KindBadge kind={change.kind} /> since #{from}
          </div>
          {change.diff ? (
            <pre class="file-diff" data-testid="file-diff">
              {change.diff.split('\n').map((line, i) => (
                <span
                  key={i}
                  class={
                    line.startsWith('+') && !line.startsWith('+++')
                      ? 'add'
                      : line.startsWith('-') && !line.startsWith('---')
                        ? 'del'
                        : line.startsWith('@@')
                          ? 'hunk'
                          : undefined
                  }
                >
                  {visibleLines(line)}
                  {'\n'}
                </span>
              ))}
            </pre>
          ) : (
            <p class="muted">
              No text diff (
              {[change.before, change.after]
                .filter((e): e is Entry => !!e)
                .map((e) => `${formatBytes(e.size)}, sha-256 ${e.hash.slice(0, 12)}…`)
                .join(' → ')}
              ).
            </p>
          )}
        </div>
      )}
      {file === undefined && !error ? (
        <p class="muted">Loading…</p>
      ) : file === null ? (
        <p class="muted" data-testid="file-absent">
          No file {visibleText(path)} at event #{at}.
        </p>
      ) : file && file.text != null ? (
        <pre class="file-text" data-testid="file-text">
          {visibleLines(file.text)}
        </pre>
      ) : file && file.base64 != null ? (
        <p class="file-binary" data-testid="file-binary">
          Binary file: {formatBytes(file.size)}, sha-256 {file.hash}
        </p>
      ) : file ? (
        <p class="file-binary" data-testid="file-binary">
          Too big to show here: {formatBytes(file.size)}, sha-256 {file.hash}
        </p>
      ) : null}
    </div>
  );
}

/** The files a tool call changed (its change set), each a link into the Files tab as of its result. */
export function CallFiles({ call }: { call: ToolCallView }) {
  const files = call.files;
  if (!files) return null;
  const result = call.result;
  const applied = result && !result.synthetic && !result.afterMarker;
  return (
    <div class="call-files" data-testid="call-files">
      <span class="muted">{applied ? 'files:' : 'files (not applied in this branch: its result was not recorded here):'}</span>
      {files.changes.map((c) => (
        <a
          key={c.path}
          href={filesHash(applied ? result.seq : files.seq, c.path)}
          class={c.deleted ? 'deleted' : undefined}
          data-path={c.path}
          title={c.deleted ? 'deleted by this call' : 'written by this call: open it in the Files tab'}
          onClick={(e) => {
            e.preventDefault();
            openFiles(applied ? result.seq : files.seq, c.path);
          }}
        >
          {visibleText(c.deleted ? `−${c.path}` : c.path)}
        </a>
      ))}
    </div>
  );
}

function formatBytes(n: number): string {
  return n < 1024 ? `${n} B` : n < 1024 * 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1024 / 1024).toFixed(1)} MiB`;
}
