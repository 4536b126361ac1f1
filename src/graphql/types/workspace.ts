// Session.workspace: the notes tools' state, derived from the log
// (store/session-log.ts `workspace`). Mapping only.
import { builder } from '../builder.ts';
import { WORKSPACE_MAX_KEYS } from '../../agent/tools.ts';
import type { WorkspaceEntry } from '../../store/session-log.ts';
import { logAsOf } from '../../store/log-as-of.ts';
import { seqWithin } from '../../store/file-blobs.ts';
import { scopedReads } from '../scoped-reads.ts';

const WorkspaceEntryRef = builder.objectRef<WorkspaceEntry>('WorkspaceEntry').implement({
  description: 'One key of a session workspace: its latest value and the seq of the `plugin/workspace/write` event that set it.',
  fields: (t) => ({
    key: t.exposeString('key'),
    value: t.exposeString('value'),
    seq: t.exposeInt('seq', { description: 'The write event (its ok `tool/result` is at seq + 1); below inheritedEventCount: inherited.' }),
  }),
});

builder.objectFields('Session', (t) => ({
  workspace: t.field({
    type: [WorkspaceEntryRef],
    description:
      'The workspace as of event `atSeq` (default: the end of the log), inherited writes included, in key order: the latest completed write of each key ' +
      `(a write whose result was never recorded is absent). A workspace holds at most ${WORKSPACE_MAX_KEYS} keys. ` +
      'The cost is the keys, never the log.',
    // The log as of the row's eventCount (one snapshot, docs/contract.md#log), through the row's own lineage.
    args: { atSeq: t.arg.int() },
    // At `atSeq`: the same snapshot ending after that event (a write counts once its ok result is in it).
    resolve: async (s, { atSeq }, ctx) => {
      const snapshot = logAsOf(s, atSeq != null ? seqWithin(atSeq, s.eventCount) + 1 : undefined);
      return (await scopedReads(ctx).log.workspace(snapshot, WORKSPACE_MAX_KEYS)).entries;
    },
  }),
}));
