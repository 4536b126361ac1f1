// The core event types by name, without their schemas (events.ts). The
// dashboard imports this list: importing events.ts would bundle zod, whose
// `Function('')` probe the dashboard's CSP (no 'unsafe-eval') reports.
// events.ts checks at compile time that this list and its schemas agree.
export const CORE_EVENT_TYPE_NAMES = [
  'session/title',
  'session/model',
  'inbox/add',
  'inbox/remove',
  'turn/start',
  'step/start',
  'model/message',
  'tool/result',
  'step/end',
  'turn/end',
  'surface/replace',
  'session/tools',
  'session/runner-tools',
  'session/end-seed',
  'session/instructions',
  'tool/approval-request',
  'tool/approval',
  'session/tool-approval',
] as const;

/** The event a call's change set is stored as, right before its `tool/result`, in the same append (file-tree.ts). */
export const FILES_CHANGE = 'plugin/files/change';
