// Log events as the dashboard holds them (client/dashboard conversation.ts), for its view-model tests.
import type { LogEvent } from '../../client/dashboard/src/conversation.ts';

const T0 = Date.UTC(2026, 0, 1);

/** Event `seq` of a session's own log, made `ms` after 2026-01-01 (by default 100 ms a seq); `flags` set the rest. */
export const dashboardEvent = (
  seq: number,
  type: string,
  data: Record<string, unknown>,
  { ms = seq * 100, ...flags }: Partial<LogEvent> & { ms?: number } = {},
): LogEvent => ({
  id: `evt_${seq}`,
  seq,
  type,
  data,
  inherited: false,
  synthetic: false,
  createdAt: new Date(T0 + ms).toISOString(),
  ...flags,
});
