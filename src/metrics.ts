// Prometheus metrics of one service instance (served at /metrics). Each app
// has its own registry, so several apps in one process (tests) don't collide.
// Labels are bounded sets: routes, operation types, schema root fields, error
// codes, reasons; never ids, tenants or client-chosen names.
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { TurnUpdate } from './agent/turn-updates.ts';

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300];

export class ServiceMetrics {
  readonly registry = new Registry();
  readonly httpRequests = new Counter({
    name: 'forkline_http_requests_total',
    help: 'HTTP requests by route, method and status code.',
    labelNames: ['route', 'method', 'status'] as const,
    registers: [this.registry],
  });
  readonly operations = new Counter({
    name: 'forkline_graphql_operations_total',
    help: 'GraphQL operations executed (HTTP, SSE and WebSocket) by type and root field.',
    labelNames: ['type', 'field'] as const,
    registers: [this.registry],
  });
  readonly errors = new Counter({
    name: 'forkline_graphql_errors_total',
    help: 'Errors returned to clients, by extensions.code.',
    labelNames: ['code'] as const,
    registers: [this.registry],
  });
  readonly rejected = new Counter({
    name: 'forkline_rejected_requests_total',
    help:
      'Requests and connections refused before execution, by reason (unauthenticated, rate_limited, auth_throttled, connections_per_address; ' +
      "a stream past its tenant's or its token's cap: tenant_connections, tenant_subscriptions, token_connections, token_subscriptions).",
    labelNames: ['reason'] as const,
    registers: [this.registry],
  });
  readonly unresponsiveSockets = new Counter({
    name: 'forkline_ws_unresponsive_closed_total',
    help: 'WebSockets closed with 4408: no pong and nothing read for the liveness period.',
    registers: [this.registry],
  });
  readonly tooSlowSockets = new Counter({
    name: 'forkline_ws_too_slow_closed_total',
    help: 'WebSockets closed with 4408 SUBSCRIBER_TOO_SLOW: more queued for them than FORKLINE_WS_MAX_BUFFERED_BYTES.',
    registers: [this.registry],
  });
  readonly stalledResponses = new Counter({
    name: 'forkline_http_stalled_responses_total',
    help: 'HTTP responses cut because their client did not take what was queued for it within FORKLINE_HTTP_RESPONSE_STALL_TIMEOUT_MS.',
    registers: [this.registry],
  });
  readonly activeSubscriptions = new Gauge({
    name: 'forkline_active_subscriptions',
    help: 'Subscriptions currently open (SSE and WebSocket).',
    registers: [this.registry],
  });
  readonly standbyReads = new Counter({
    name: 'forkline_standby_reads_total',
    help:
      'Reads meant for a hot standby (DATABASE_READ_URL), by who answered (standby; primary: standby behind or down; both) and what they read ' +
      "(events: event pages and subscription catch-up; sessions: session lists; session: a session query's row; search: searchSessions).",
    labelNames: ['served', 'read'] as const,
    registers: [this.registry],
  });
  readonly standbyUp = new Gauge({
    name: 'forkline_standby_up',
    help: 'Hot standbys (DATABASE_READ_URL, standby1… in its order): 1 when its last poll answered and it is in recovery.',
    labelNames: ['standby'] as const,
    registers: [this.registry],
  });
  readonly standbyLagBytes = new Gauge({
    name: 'forkline_standby_lag_bytes',
    help: 'WAL bytes the primary wrote that the standby has not replayed yet (polled).',
    labelNames: ['standby'] as const,
    registers: [this.registry],
  });
  readonly standbyLagSeconds = new Gauge({
    name: 'forkline_standby_lag_seconds',
    help: 'Seconds since the standby replayed its last transaction while it is behind (0: caught up).',
    labelNames: ['standby'] as const,
    registers: [this.registry],
  });
  readonly turnDuration = this.durations('forkline_turn_duration_seconds', 'Duration of agent turns run by this process, by turn/end reason.', 'reason');
  readonly forkDuration = this.durations(
    'forkline_fork_duration_seconds',
    'Duration of forkSession (kind=fork) and branchSession (kind=branch) mutations.',
    'kind',
  );

  private readonly turnStarts = new Map<string, number>();

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics ?? true) collectDefaultMetrics({ register: this.registry });
  }

  /** Turn durations from the host's turn updates (the sessionTurns stream). */
  observeTurnUpdate(u: TurnUpdate): void {
    // Most updates are text deltas and steps: nothing to observe, not even a key to build.
    if (u.kind === 'TURN_STARTED') {
      if (this.turnStarts.size > 100_000) this.turnStarts.clear(); // turns ended by a crash never report
      this.turnStarts.set(`${u.sessionId}:${u.turn}`, performance.now());
    } else if (u.kind === 'TURN_ENDED') {
      const key = `${u.sessionId}:${u.turn}`;
      const start = this.turnStarts.get(key);
      this.turnStarts.delete(key);
      if (start !== undefined) this.turnDuration.observe({ reason: u.reason ?? 'unknown' }, (performance.now() - start) / 1000);
    }
  }

  /** The standbys' last polled state, for the next scrape. */
  observeStandbys(statuses: ReadonlyArray<{ name: string; up: boolean; lagBytes?: number; lagSeconds?: number }>): void {
    for (const s of statuses) {
      this.standbyUp.set({ standby: s.name }, s.up ? 1 : 0);
      if (s.lagBytes !== undefined) this.standbyLagBytes.set({ standby: s.name }, s.lagBytes);
      if (s.lagSeconds !== undefined) this.standbyLagSeconds.set({ standby: s.name }, s.lagSeconds);
    }
  }

  private durations<L extends string>(name: string, help: string, label: L) {
    return new Histogram<L>({ name, help, labelNames: [label], buckets: DURATION_BUCKETS, registers: [this.registry] });
  }

  async render(): Promise<{ contentType: string; body: string }> {
    return { contentType: this.registry.contentType, body: await this.registry.metrics() };
  }
}
