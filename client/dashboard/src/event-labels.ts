// Readable names for plugin events on the timeline (the raw type stays on
// hover and in the event's data): "plugin/agent/error" reads "agent error".
const PLUGIN_LABELS: Record<string, string> = {
  'plugin/agent/error': 'agent error',
  'plugin/agent/retry': 'model call retried',
  'plugin/agent/tool-server-down': 'tool server down',
  'plugin/chat/head': 'chat head',
  'plugin/agui/run': 'AG-UI run',
  'plugin/compaction/start': 'compaction started',
  'plugin/compaction/end': 'compaction ended',
  'plugin/files/change': 'files changed',
  'plugin/mcp/result': 'MCP result',
  'plugin/workspace/write': 'workspace write',
};

/** The label a timeline row shows for a type: core types as they are, plugin types in words. */
export function eventLabel(type: string): string {
  if (!type.startsWith('plugin/')) return type;
  return PLUGIN_LABELS[type] ?? type.slice('plugin/'.length).replace(/[/_-]+/g, ' ');
}
