// OpenTelemetry traces of agent turns, in the GenAI semantic conventions
// (docs/operations.md "Tracing"): per turn an `invoke_agent` span, per model call a
// `chat {model}` span, per tool call an `execute_tool {name}` span, exported
// over OTLP/HTTP (JSON). Off unless an OTLP endpoint is configured; the agent
// loop sees only the AgentObserver interface this module implements.
//
// A turn's trace and span ids are derived from (session id, turn), so a forked
// child computes the id of its parent's span at the cut without storing it:
// the child's first turn links to it. Exporter failures are logged
// (throttled) and the spans dropped; the agent never waits for an export.
import { createHash } from 'node:crypto';
import { ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace, type Attributes, type Link, type Span, type Tracer } from '@opentelemetry/api';
import { ExportResultCode, type ExportResult } from '@opentelemetry/core';
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { defaultResource, detectResources, envDetector, resourceFromAttributes } from '@opentelemetry/resources';
import {
  BatchSpanProcessor,
  NodeTracerProvider,
  RandomIdGenerator,
  type IdGenerator,
  type ReadableSpan,
  type SpanExporter,
} from '@opentelemetry/sdk-trace-node';
import type { ChatMessage, ModelAnswer } from '../core/chat.ts';
import type {
  AgentObserver,
  ModelCallObserver,
  ModelUsage,
  SyntheticResult,
  ToolCallObserver,
  TurnEndReason,
  TurnObserver,
  TurnStart,
} from '../agent/agent-observer.ts';
import type { ToolCall } from '../core/events.ts';
import type { FailedAttempt } from '../agent/models/model.ts';

export interface TracingOptions {
  /** The full traces URL (…/v1/traces); unset: the exporter reads OTEL_EXPORTER_OTLP_TRACES_ENDPOINT / OTEL_EXPORTER_OTLP_ENDPOINT. */
  url?: string;
  /** Extra export headers; unset: OTEL_EXPORTER_OTLP_(TRACES_)HEADERS. */
  headers?: Record<string, string>;
  /** How long one export may take, retries included; unset: OTEL_EXPORTER_OTLP_(TRACES_)TIMEOUT, else 10 s. */
  timeoutMillis?: number;
  /** Record prompts, answers, tool arguments and results (OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true). */
  captureContent?: boolean;
  /** Delay between batch exports; unset: OTEL_BSP_SCHEDULE_DELAY, else 5 s. */
  scheduledDelayMillis?: number;
  /** How long close() waits for the last spans to go out. */
  shutdownTimeoutMillis?: number;
  /** Replaces the OTLP exporter (embedders). */
  exporter?: SpanExporter;
  log?: (msg: string, err?: unknown) => void;
}

const truthy = (v: string | undefined) => v?.trim().toLowerCase() === 'true';

/**
 * Tracing options from the standard OTEL_* variables, or undefined (tracing
 * off) unless an OTLP endpoint is set. OTEL_SDK_DISABLED=true or
 * OTEL_TRACES_EXPORTER=none turn it off as well.
 */
export function tracingOptionsFromEnv(env: NodeJS.ProcessEnv = process.env): TracingOptions | undefined {
  const endpoint = env.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT?.trim() || env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!endpoint || truthy(env.OTEL_SDK_DISABLED)) return undefined;
  if (
    (env.OTEL_TRACES_EXPORTER ?? '')
      .split(',')
      .map((s) => s.trim())
      .includes('none')
  )
    return undefined;
  return { captureContent: truthy(env.OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT) };
}

/** The trace and span ids of a turn's invoke_agent span: a pure function of (session, turn). */
export function turnSpanIds(sessionId: string, turn: number): { traceId: string; spanId: string } {
  const hex = createHash('sha256').update(`forkline-turn\0${sessionId}\0${turn}`).digest('hex');
  return { traceId: hex.slice(0, 32), spanId: hex.slice(32, 48) };
}

/** Random ids, except for the one span whose ids were preset (startSpan is synchronous). */
class PresetIdGenerator implements IdGenerator {
  private readonly random = new RandomIdGenerator();
  private traceId?: string;
  private spanId?: string;

  preset(ids: { traceId: string; spanId: string }) {
    this.traceId = ids.traceId;
    this.spanId = ids.spanId;
  }

  clear() {
    this.traceId = this.spanId = undefined;
  }

  generateTraceId(): string {
    const id = this.traceId ?? this.random.generateTraceId();
    this.traceId = undefined;
    return id;
  }

  generateSpanId(): string {
    const id = this.spanId ?? this.random.generateSpanId();
    this.spanId = undefined;
    return id;
  }
}

/** Export failures are logged at most once a minute (with how many spans were dropped), never thrown. */
class LoggedExporter implements SpanExporter {
  private lastLogged = 0;
  private dropped = 0;

  constructor(
    private readonly inner: SpanExporter,
    private readonly log: (msg: string, err?: unknown) => void,
  ) {}

  export(spans: ReadableSpan[], done: (result: ExportResult) => void): void {
    const failed = (error: unknown) => {
      this.dropped += spans.length;
      const now = Date.now();
      if (now - this.lastLogged >= 60_000) {
        this.lastLogged = now;
        this.log(`tracing: could not export ${this.dropped} span(s); they were dropped`, error);
        this.dropped = 0;
      }
    };
    try {
      this.inner.export(spans, (result) => {
        if (result.code !== ExportResultCode.SUCCESS) failed(result.error);
        done(result);
      });
    } catch (err) {
      failed(err);
      done({ code: ExportResultCode.FAILED, error: err as Error });
    }
  }

  shutdown(): Promise<void> {
    return this.inner.shutdown();
  }

  forceFlush(): Promise<void> {
    return this.inner.forceFlush?.() ?? Promise.resolve();
  }
}

// ---- message content in the GenAI conventions' JSON shape ----

type Part =
  | { type: 'text'; content: string }
  | { type: 'tool_call'; id: string; name: string; arguments: unknown }
  | { type: 'tool_call_response'; id: string; response: string };

const parseArgs = (text: string): unknown => {
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
};

function toolCallParts(calls: readonly ToolCall[]): Part[] {
  return calls.map((c) => ({ type: 'tool_call', id: c.id, name: c.name, arguments: parseArgs(c.arguments) }));
}

/** A model call's messages as the span's gen_ai.input.messages (tests compare requests through it). */
export function inputMessages(messages: readonly ChatMessage[]): string {
  return JSON.stringify(
    messages.map((m) => {
      if (m.role === 'tool') return { role: 'tool', parts: [{ type: 'tool_call_response', id: m.tool_call_id, response: m.content }] };
      if (m.role === 'assistant') {
        const parts: Part[] = m.content ? [{ type: 'text', content: m.content }] : [];
        parts.push(...toolCallParts((m.tool_calls ?? []).map((c) => ({ id: c.id, name: c.function.name, arguments: c.function.arguments }))));
        return { role: 'assistant', parts };
      }
      return { role: m.role, parts: [{ type: 'text', content: m.content }] };
    }),
  );
}

const finishReason = (answer: ModelAnswer) => (answer.toolCalls.length ? 'tool_calls' : 'stop');

function outputMessages(answer: ModelAnswer): string {
  const parts: Part[] = answer.text ? [{ type: 'text', content: answer.text }] : [];
  parts.push(...toolCallParts(answer.toolCalls));
  return JSON.stringify([{ role: 'assistant', parts, finish_reason: finishReason(answer) }]);
}

// ---- the observer ----

const ERROR_REASONS = new Set<TurnEndReason>(['failed', 'interrupted', 'deleted']);

export class GenAiTracing implements AgentObserver {
  readonly enabled = true;
  private readonly provider: NodeTracerProvider;
  private readonly tracer: Tracer;
  private readonly ids = new PresetIdGenerator();
  private readonly captureContent: boolean;
  private readonly shutdownTimeoutMillis: number;

  constructor(opts: TracingOptions = {}) {
    const log = opts.log ?? ((m: string, e?: unknown) => console.error(m, e ?? ''));
    this.captureContent = opts.captureContent ?? false;
    this.shutdownTimeoutMillis = opts.shutdownTimeoutMillis ?? 5000;
    const protocol = process.env.OTEL_EXPORTER_OTLP_TRACES_PROTOCOL ?? process.env.OTEL_EXPORTER_OTLP_PROTOCOL;
    if (!opts.exporter && protocol && protocol !== 'http/json') log(`tracing: OTLP protocol "${protocol}" is not supported; exporting http/json`);
    const exporter =
      opts.exporter ??
      new OTLPTraceExporter({
        ...(opts.url ? { url: opts.url } : {}),
        ...(opts.headers ? { headers: opts.headers } : {}),
        ...(opts.timeoutMillis ? { timeoutMillis: opts.timeoutMillis } : {}),
      });
    // OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the default name.
    const resource = defaultResource()
      .merge(resourceFromAttributes({ 'service.name': 'forkline' }))
      .merge(detectResources({ detectors: [envDetector] }));
    this.provider = new NodeTracerProvider({
      resource,
      idGenerator: this.ids,
      spanProcessors: [
        new BatchSpanProcessor(
          new LoggedExporter(exporter, log),
          opts.scheduledDelayMillis !== undefined ? { scheduledDelayMillis: opts.scheduledDelayMillis } : undefined,
        ),
      ],
    });
    // Not registered globally: forkline's spans go through this tracer only.
    this.tracer = this.provider.getTracer('forkline', '0.1.0');
  }

  turnStarted(info: TurnStart): TurnObserver {
    const conversation = info.sessionId;
    const attributes: Attributes = {
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.provider.name': info.provider,
      'gen_ai.request.model': info.model,
      'gen_ai.conversation.id': conversation,
      'forkline.turn': info.turn,
    };
    if (info.inputId) attributes['forkline.input_id'] = info.inputId;
    if (info.recovered) attributes['forkline.recovered'] = true;
    if (this.captureContent && info.input !== undefined) {
      attributes['gen_ai.input.messages'] = JSON.stringify([{ role: 'user', parts: [{ type: 'text', content: info.input }] }]);
    }
    const links: Link[] = [];
    const fork = info.forkedFrom;
    if (fork) {
      attributes['forkline.fork.parent_session_id'] = fork.parentSessionId;
      attributes['forkline.fork.cut_seq'] = fork.cutSeq;
      if (fork.turn > 0) {
        const parent = turnSpanIds(fork.turnSessionId, fork.turn);
        links.push({
          context: { ...parent, traceFlags: TraceFlags.SAMPLED, isRemote: true },
          attributes: {
            'forkline.link': 'fork',
            'forkline.fork.parent_session_id': fork.parentSessionId,
            'forkline.fork.cut_seq': fork.cutSeq,
            'forkline.turn': fork.turn,
          },
        });
      }
    }
    this.ids.preset(turnSpanIds(info.sessionId, info.turn));
    let span: Span;
    try {
      span = this.tracer.startSpan('invoke_agent', { kind: SpanKind.INTERNAL, attributes, links, root: true }, ROOT_CONTEXT);
    } finally {
      this.ids.clear();
    }
    const parent = trace.setSpan(ROOT_CONTEXT, span);
    const usage: { input: number; output: number; known: boolean; costUsd?: number } = { input: 0, output: 0, known: false };
    let ended = false;
    const tracer = this.tracer;
    const capture = this.captureContent;

    const turn: TurnObserver = {
      modelCall: ({ step, provider, model, messages }): ModelCallObserver => {
        const chat = tracer.startSpan(
          `chat ${model}`,
          {
            kind: SpanKind.CLIENT,
            attributes: {
              'gen_ai.operation.name': 'chat',
              'gen_ai.provider.name': provider,
              'gen_ai.request.model': model,
              'gen_ai.conversation.id': conversation,
              'forkline.step': step,
              ...(capture ? { 'gen_ai.input.messages': inputMessages(messages) } : {}),
            },
          },
          parent,
        );
        let attempts = 1;
        return {
          end(answer: ModelAnswer & { usage?: ModelUsage }, costUsd?: number) {
            chat.setAttribute('gen_ai.response.finish_reasons', [finishReason(answer)]);
            chat.setAttribute('forkline.model.attempts', attempts);
            if (costUsd !== undefined) {
              chat.setAttribute('forkline.cost_usd', costUsd);
              usage.costUsd = (usage.costUsd ?? 0) + costUsd;
            }
            const u = answer.usage;
            if (u?.inputTokens !== undefined) {
              chat.setAttribute('gen_ai.usage.input_tokens', u.inputTokens);
              usage.input += u.inputTokens;
              usage.known = true;
            }
            if (u?.outputTokens !== undefined) {
              chat.setAttribute('gen_ai.usage.output_tokens', u.outputTokens);
              usage.output += u.outputTokens;
              usage.known = true;
            }
            if (capture) chat.setAttribute('gen_ai.output.messages', outputMessages(answer));
            chat.end();
          },
          retry(a: FailedAttempt) {
            attempts = a.attempt + 1;
            chat.addEvent('forkline.model.retry', {
              'forkline.model.attempt': a.attempt,
              'forkline.model.retry_delay_ms': a.delayMs,
              'error.message': a.error,
              ...(a.status ? { 'http.response.status_code': a.status } : {}),
            });
          },
          fail(message: string) {
            chat.setAttribute('forkline.model.attempts', attempts);
            chat.setAttribute('error.type', 'model_error');
            chat.setStatus({ code: SpanStatusCode.ERROR, message });
            chat.end();
          },
        };
      },

      toolCall: ({ step, call }): ToolCallObserver => {
        const tool = tracer.startSpan(
          `execute_tool ${call.name}`,
          { kind: SpanKind.INTERNAL, attributes: toolAttributes(conversation, step, call.id, call.name, capture ? call.arguments : undefined) },
          parent,
        );
        return {
          end({ status, content }) {
            tool.setAttribute('forkline.tool.status', status);
            if (capture) tool.setAttribute('gen_ai.tool.call.result', content);
            if (status !== 'ok') {
              tool.setAttribute('error.type', 'tool_error');
              tool.setStatus({ code: SpanStatusCode.ERROR, message: content.slice(0, 500) });
            }
            tool.end();
          },
        };
      },

      synthetic: (results: SyntheticResult[]) => {
        for (const r of results) syntheticSpan(tracer, parent, conversation, r);
      },

      end: (reason: TurnEndReason, error?: string) => {
        if (ended) return;
        ended = true;
        span.setAttribute('forkline.turn.end_reason', reason);
        if (usage.costUsd !== undefined) span.setAttribute('forkline.cost_usd', usage.costUsd);
        if (usage.known) {
          span.setAttribute('gen_ai.usage.input_tokens', usage.input);
          span.setAttribute('gen_ai.usage.output_tokens', usage.output);
        }
        if (ERROR_REASONS.has(reason)) {
          span.setAttribute('error.type', reason);
          span.setStatus({ code: SpanStatusCode.ERROR, message: reason === 'failed' && error ? error : reason });
        }
        span.end();
      },
    };
    // A fork's first turn: the results its seed made up for calls open at the cut.
    if (fork?.synthetic.length) turn.synthetic(fork.synthetic);
    return turn;
  }

  /** Exports what has ended so far. */
  async forceFlush(): Promise<void> {
    await this.provider.forceFlush().catch(() => {}); // failures are logged by LoggedExporter
  }

  /** Exports what is left (bounded by shutdownTimeoutMillis) and stops. */
  async shutdown(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((r) => (timer = setTimeout(r, this.shutdownTimeoutMillis)));
    await Promise.race([this.provider.shutdown().catch(() => {}), timeout]);
    clearTimeout(timer);
  }
}

function toolAttributes(conversation: string, step: number, callId: string, name: string, args: string | undefined): Attributes {
  return {
    'gen_ai.operation.name': 'execute_tool',
    'gen_ai.tool.name': name,
    'gen_ai.tool.call.id': callId,
    'gen_ai.tool.type': 'function',
    'gen_ai.conversation.id': conversation,
    'forkline.step': step,
    ...(args !== undefined ? { 'gen_ai.tool.call.arguments': args } : {}),
  };
}

/** A result the tool never produced: a zero-length span, marked synthetic, with its cause. */
function syntheticSpan(tracer: Tracer, parent: ReturnType<typeof trace.setSpan>, conversation: string, r: SyntheticResult) {
  const name = r.name ?? 'unknown';
  const span = tracer.startSpan(
    `execute_tool ${name}`,
    {
      kind: SpanKind.INTERNAL,
      attributes: {
        ...toolAttributes(conversation, r.step, r.callId, name, undefined),
        'forkline.synthetic': true,
        'forkline.synthetic.cause': r.cause,
        'forkline.tool.status': r.status,
      },
    },
    parent,
  );
  if (r.cause === 'interrupted') {
    span.setAttribute('error.type', 'interrupted');
    span.setStatus({ code: SpanStatusCode.ERROR, message: 'interrupted' });
  }
  span.end();
}
