// Session.files, Session.file and Session.fileChanges (docs/contract.md#graphql-names):
// a session's file workspace as of any event, read from the log and the blob
// store without running anything. Mapping only: store/file-blobs.ts.
import { builder } from '../builder.ts';
import { logOfRow } from '../../store/log-as-of.ts';
import { DIFF_MAX_EDIT_LINES } from '../../core/unified-diff.ts';
import {
  DIFF_MAX_BYTES,
  DIFF_REQUEST_MAX_BYTES,
  DIFF_REQUEST_TIMEOUT_MS,
  FILE_READ_MAX_BYTES,
  type FileChange,
  type FileContent,
  type FilesRef,
} from '../../store/file-blobs.ts';
import type { FileEntry } from '../../core/file-tree.ts';
import type { SessionRow } from '../../store/session-rows.ts';
import { scopedReads } from '../scoped-reads.ts';

const FileEntryRef = builder.objectRef<FileEntry>('FileEntry').implement({
  description: "A file of a session's workspace as of some event.",
  fields: (t) => ({
    path: t.exposeString('path', { description: 'Relative to the workspace, "/"-separated.' }),
    size: t.exposeInt('size', { description: 'Bytes.' }),
    hash: t.exposeString('hash', { description: 'sha-256 of its content (hex).' }),
    seq: t.exposeInt('seq', { description: "The change set that last wrote it (its call's tool/result is at seq + 1)." }),
  }),
});

const FileContentRef = builder.objectRef<FileContent>('FileContent').implement({
  description: `A file with its content (files over ${FILE_READ_MAX_BYTES} bytes: neither text nor base64).`,
  fields: (t) => ({
    path: t.exposeString('path'),
    size: t.exposeInt('size'),
    hash: t.exposeString('hash'),
    seq: t.exposeInt('seq'),
    text: t.exposeString('text', { nullable: true, description: 'The content, when it is UTF-8 text.' }),
    base64: t.exposeString('base64', { nullable: true, description: 'The content in base64, when it is not text.' }),
  }),
});

const FileChangeKindEnum = builder.enumType('FileChangeKind', { values: ['ADDED', 'CHANGED', 'DELETED'] as const });

const FileChangeRef = builder.objectRef<FileChange>('FileChange').implement({
  description: 'How one path differs between two events of a session.',
  fields: (t) => ({
    path: t.exposeString('path'),
    kind: t.field({ type: FileChangeKindEnum, resolve: (c) => c.kind }),
    before: t.field({ type: FileEntryRef, nullable: true, resolve: (c) => c.before }),
    after: t.field({ type: FileEntryRef, nullable: true, resolve: (c) => c.after }),
    diff: t.exposeString('diff', {
      nullable: true,
      description:
        `A unified diff, when both sides are text of at most ${DIFF_MAX_BYTES} bytes, the read's diffs stay within ${DIFF_REQUEST_MAX_BYTES} bytes of text ` +
        `in all (in path order), and the change is within ${DIFF_MAX_EDIT_LINES} changed lines and the read's ${DIFF_REQUEST_TIMEOUT_MS / 1000} s for diffs.`,
    }),
  }),
});

/** The session as of its row's length (a Session read is one snapshot, docs/contract.md#log). */
const filesRef = (s: Pick<SessionRow, 'id' | 'treeId' | 'eventCount' | 'inheritedRanges' | 'inheritedEventCount'>): FilesRef => ({
  ref: logOfRow(s),
  eventCount: s.eventCount,
});

builder.objectFields('Session', (t) => ({
  files: t.field({
    type: [FileEntryRef],
    description: "The files of the session's workspace as of `atSeq` (default: its last event), under the directory `path` (default: all), in path order.",
    args: { atSeq: t.arg.int(), path: t.arg.string() },
    resolve: (s, args, ctx) => scopedReads(ctx).files.files(filesRef(s), { atSeq: args.atSeq, dir: args.path ?? '' }),
  }),
  file: t.field({
    type: FileContentRef,
    nullable: true,
    description: 'One file of the workspace as of `atSeq` (default: its last event), with its content; null when there is no such file then.',
    args: { path: t.arg.string({ required: true }), atSeq: t.arg.int() },
    resolve: (s, args, ctx) => scopedReads(ctx).files.file(filesRef(s), args.path, args.atSeq),
  }),
  fileChanges: t.field({
    type: [FileChangeRef],
    description:
      'What changed in the workspace after `fromSeq` (-1: from nothing) through `toSeq` (default: the last event), per path, with a unified diff for text.',
    args: { fromSeq: t.arg.int({ required: true }), toSeq: t.arg.int() },
    resolve: (s, args, ctx) => scopedReads(ctx).files.changes(filesRef(s), args.fromSeq, args.toSeq),
  }),
}));
