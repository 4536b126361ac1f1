// Event codec: one zod schema per core event type (docs/contract.md#log), per log format
// version (docs/contract.md#formats). V3 is frozen; V4 only widens it with the fork variants.
import { z } from 'zod';
import { CORE_EVENT_TYPE_NAMES } from './event-types.ts';
import { badInput } from './errors.ts';
import { unstorableReason } from './storable.ts';
import {
  MAX_APPROVAL_REASON_CHARS,
  MAX_COMPACTION_INSTRUCTIONS_CHARS,
  MAX_INSTRUCTIONS_CHARS,
  MAX_NOTE_KEY_CHARS,
  MAX_NOTE_VALUE_CHARS,
  MAX_RESPONSE_SCHEMA_CHARS,
} from './text-limits.ts';
import { FILES_CHANGE, filesChangeDataSchema } from './file-tree.ts';
import { FILE_SCOPES, TOOL_EFFECTS, toolSchemaProblem, type FileScope, type ToolEffect } from './tools.ts';
import { modelNameSchema, providerNameSchema } from './input-rules.ts';
import { MAX_ID_CHARS } from './derived-ids.ts';

export const CURRENT_FORMAT_VERSION = 4;
export const FORMAT_VERSIONS = [3, 4] as const;
export type FormatVersion = (typeof FORMAT_VERSIONS)[number];

const nonNegInt = z.number().int().nonnegative();
const positiveInt = z.number().int().positive();
const id = z.string().min(1).max(MAX_ID_CHARS);
/**
 * The most tokens one model answer may report (far past any context window): a larger count is not a count
 * (agent/models/language-model.ts leaves it out of what it stores), and a session's sums stay exact
 * (Session.totals; a runner's absurd count would otherwise break them for every reader).
 */
export const MAX_REPORTED_TOKENS = 1_000_000_000;
const tokenCount = nonNegInt.max(MAX_REPORTED_TOKENS);

export const toolCallSchema = z.strictObject({
  id,
  name: z.string().min(1).max(200),
  /** The arguments exactly as the model produced them (JSON text). */
  arguments: z.string(),
});
/** A call as a V4 log keeps it: what the model produced, and the effect recorded with it. */
export type ToolCall = z.infer<typeof toolCallSchema> & { effect?: ToolEffect; files?: FileScope };

/**
 * The JSON Schema an input asks its final answer to match (docs/contract.md#agent-loop), with the name
 * providers that take one are sent (OpenAI's `json_schema.name`). A JSON Schema as such is checked where
 * the input comes in (agent/structured-output.ts); the codec holds its shape and size.
 */
export const responseFormatSchema = z.strictObject({
  schema: z
    .record(z.string(), z.json())
    .refine((s) => JSON.stringify(s).length <= MAX_RESPONSE_SCHEMA_CHARS, `must be at most ${MAX_RESPONSE_SCHEMA_CHARS} characters of JSON`),
  name: z
    .string()
    .regex(/^[A-Za-z0-9_-]{1,64}$/, 'a schema name is 1-64 letters, digits, "_" or "-"')
    .optional(),
});
export type ResponseFormat = z.infer<typeof responseFormatSchema>;

// ---- V3: released; never edited. ----
const v3 = {
  'session/title': z.strictObject({ title: z.string().max(500) }),
  'session/model': z.strictObject({
    provider: z.string().min(1),
    model: z.string().min(1),
    settings: z.record(z.string(), z.unknown()).optional(),
  }),
  'inbox/add': z.strictObject({ inputId: id, text: z.string() }),
  'inbox/remove': z.strictObject({ inputId: id, reason: z.enum(['taken', 'cancelled']) }),
  'turn/start': z.strictObject({ turn: positiveInt, inputId: id }),
  'step/start': z.strictObject({ turn: positiveInt, step: positiveInt }),
  'model/message': z.strictObject({
    turn: positiveInt,
    step: positiveInt,
    text: z.string(),
    toolCalls: z.array(toolCallSchema),
  }),
  'tool/result': z.strictObject({
    turn: positiveInt,
    step: positiveInt,
    callId: id,
    resultId: id,
    status: z.enum(['ok', 'error', 'interrupted']),
    content: z.string(),
    name: z.string().optional(),
  }),
  'step/end': z.strictObject({
    turn: positiveInt,
    step: positiveInt,
    reason: z.enum(['completed', 'failed', 'interrupted']),
  }),
  'turn/end': z.strictObject({
    turn: positiveInt,
    reason: z.enum(['completed', 'failed', 'cancelled', 'interrupted']),
  }),
  'surface/replace': z.strictObject({ fromSeq: nonNegInt, toSeq: nonNegInt, content: z.string() }),
} as const;

// ---- V4: V3 plus the fork variants (docs/contract.md#exact-fork). ----
const v4 = {
  ...v3,
  'tool/result': v3['tool/result'].extend({
    status: z.enum([...v3['tool/result'].shape.status.options, 'not-started']),
  }),
  'step/end': v3['step/end'].extend({
    reason: z.enum([...v3['step/end'].shape.reason.options, 'forked']),
  }),
  'turn/end': v3['turn/end'].extend({
    reason: z.enum([...v3['turn/end'].shape.reason.options, 'forked']),
  }),
  // Tokens the provider reported for this answer (optional: not every provider does),
  // and each call's effect as the agent knew it when the model made the call
  // (repair's retry advice reads it from here, never from the tool's server later);
  // `files`: the tool works in the session's file workspace (`only` there, or `also`
  // outside it), whose changes are recorded with its result, so a cut before that
  // result restores the files.
  'model/message': v3['model/message'].extend({
    // The final answer parsed as JSON, once it matched the response schema its input asked for (structured output).
    output: z.json().optional(),
    toolCalls: z.array(toolCallSchema.extend({ effect: z.enum(TOOL_EFFECTS).optional(), files: z.enum(FILE_SCOPES).optional() })),
    // costUsd: what the host's price table made of these tokens when it wrote the answer (agent/models/model-catalog.ts).
    usage: z
      .strictObject({ inputTokens: tokenCount.optional(), outputTokens: tokenCount.optional(), costUsd: z.number().nonnegative().max(1e9).optional() })
      .optional(),
  }),
  // An input may ask for an answer matching a JSON Schema (structured output): kept with it, so a fork or a replay asks the same.
  'inbox/add': v3['inbox/add'].extend({ responseFormat: responseFormatSchema.optional() }),
  // The tools the session's agent may be offered from here on: names, `<server>__*`, or `*` (all).
  // No such event: all. Kept in the log so a fork or a replay offers the tools of its cut.
  'session/tools': z.strictObject({ tools: z.array(z.string().min(1).max(200)).max(500) }),
  // The model's context window in tokens, when the session names it (unknown models have no known window); its names
  // bounded as at every door (core/input-rules.ts), a V3 recording's too (decodeEvent).
  'session/model': v3['session/model'].extend({ provider: providerNameSchema, model: modelNameSchema, contextTokens: positiveInt.optional() }),
  // The session's instructions (its system prompt): sent first in every model request from here on;
  // empty text: none. Kept in the log so a fork or a replay sends those of its cut.
  'session/instructions': z.strictObject({ text: z.string().max(MAX_INSTRUCTIONS_CHARS) }),
  // The tools an external runner runs for this session, as it declared them (declareRunnerTools): what its
  // model is offered (ModelRequest.tools) and the effect each of its calls is recorded with, so repair
  // words a cut-off call of the runner's own tool as it words forkline's (docs/runners.md).
  'session/runner-tools': z.strictObject({
    tools: z
      .array(
        z.strictObject({
          name: z.string().min(1).max(200),
          description: z.string().max(10_000).optional(),
          // Held to an MCP server's tool's bound (core/tools.ts): the set is sent with every model request of the session.
          inputSchema: z
            .record(z.string(), z.json())
            .superRefine((schema, ctx) => {
              const problem = toolSchemaProblem(schema);
              if (problem) ctx.addIssue({ code: 'custom', message: problem });
            })
            .optional(),
          effect: z.enum(TOOL_EFFECTS),
        }),
      )
      .max(500)
      // A set names each tool once: a model request offering one name twice is refused by providers.
      .refine((tools) => new Set(tools.map((t) => t.name)).size === tools.length, 'a runner tool set names each tool once'),
  }),
  // Tool approval (docs/contract.md#tool-approval): the agent asks before it runs a call of the open step, and stops;
  // the decision (by whom, why) lets the turn go on. A call's request and decision are paired by the reducer.
  'tool/approval-request': z.strictObject({ turn: positiveInt, step: positiveInt, callId: id }),
  'tool/approval': z.strictObject({
    callId: id,
    decision: z.enum(['approved', 'denied']),
    reason: z.string().max(MAX_APPROVAL_REASON_CHARS),
    by: z.string().min(1).max(200),
  }),
  // The tools whose calls need approval in this session from here on, besides those the operator's config marks
  // (names, `<server>__*`, `*`; empty: only those). In the log so a fork asks as its cut did.
  'session/tool-approval': z.strictObject({ tools: z.array(z.string().min(1).max(200)).max(500) }),
  'session/end-seed': z.strictObject({
    parentSessionId: id,
    cutSeq: z.number().int().min(-1),
    inheritedEventCount: nonNegInt,
  }),
} as const;

const codecs: Record<FormatVersion, Record<string, z.ZodType>> = { 3: v3, 4: v4 };

export type CoreEventType = keyof typeof v4;
export const CORE_EVENT_TYPES = Object.keys(v4) as CoreEventType[];
// The schema-free list (event-types.ts) names exactly these types: a type added to one and not the other fails here.
type SameNames<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const namesAgree: SameNames<CoreEventType, (typeof CORE_EVENT_TYPE_NAMES)[number]> = true;
void namesAgree;
export type EventData<T extends CoreEventType> = z.infer<(typeof v4)[T]>;
/** A tool an external runner declared (session/runner-tools). */
export type RunnerTool = EventData<'session/runner-tools'>['tools'][number];

/** Plugin events: `plugin/<name>/<event>`; data is the plugin's business. */
export const PLUGIN_TYPE = /^plugin\/[a-z0-9][a-z0-9_-]*\/[a-z0-9][a-z0-9_./-]*$/;
const pluginData = z.record(z.string(), z.json());
/**
 * Plugin events forkline itself acts on, validated like core events in every
 * format version: a change set is made into files on disk (docs/files.md); a
 * compaction's instructions are sent to a model; a note is read back by
 * note_read and Session.workspace.
 */
const pluginCodecs: Record<string, z.ZodType> = {
  [FILES_CHANGE]: filesChangeDataSchema,
  // A note a call wrote (agent/tools.ts note_write): held to that tool's key and value at every door, or a
  // recording or a runner's batch could store values of megabytes under a thousand keys for one read to take.
  'plugin/workspace/write': z.strictObject({
    callId: id,
    key: z.string().min(1).max(MAX_NOTE_KEY_CHARS),
    value: z.string().max(MAX_NOTE_VALUE_CHARS),
  }),
  // A compaction's start (agent/compaction.ts): its instructions reach the summariser's prompt, held to compactSession's limit at every door.
  'plugin/compaction/start': z.looseObject({ instructions: z.string().max(MAX_COMPACTION_INSTRUCTIONS_CHARS).optional() }),
};

export const isPluginType = (type: string) => PLUGIN_TYPE.test(type);

/** The longest event type a door takes (a plugin's are the plugin's to name: a type is shown, so it is bounded). */
export const MAX_EVENT_TYPE_CHARS = 200;

/**
 * Types whose V4 codec bounds what V3's (frozen) did not: an event of an older version is held to them too, so a
 * recording written as V3 cannot bring in what every other door refuses. Every V3 event is a V4 event but for these bounds.
 */
const BOUNDED_SINCE_V4 = new Set(['session/model']);

/** An event as written to a log (seq assigned by the store). */
export interface LogEvent {
  seq: number;
  type: string;
  /** Its payload: view it through `asCoreEvent` (a union by type) or `dataOf` (core-event.ts). */
  data: unknown;
  inherited?: boolean;
  synthetic?: boolean;
}

/** An event to append: seq is assigned by the store. */
export interface NewEvent {
  type: string;
  data: unknown;
  synthetic?: boolean;
}

function describeIssues(error: z.ZodError): string {
  return error.issues.map((i) => `${['data', ...i.path].join('.')}: ${i.message}`).join('; ');
}

/**
 * Validates one event payload against the codec of a format version and
 * returns the parsed data. Throws BAD_USER_INPUT naming the field.
 */
export function decodeEvent(type: unknown, data: unknown, version: FormatVersion = CURRENT_FORMAT_VERSION): unknown {
  if (typeof type !== 'string' || type.length === 0) throw badInput('event type must be a non-empty string');
  if (type.length > MAX_EVENT_TYPE_CHARS) throw badInput(`an event type is at most ${MAX_EVENT_TYPE_CHARS} characters (this one has ${type.length})`);
  const schema = codecs[version]?.[type] ?? (isPluginType(type) ? (pluginCodecs[type] ?? pluginData) : undefined);
  if (!schema) {
    const known = (codecs[version] as object) ? ` (format V${version})` : '';
    throw badInput(`unknown event type "${type}"${known}`, { type });
  }
  // Before zod: a value nested thousands deep would exhaust its stack.
  const unstorable = unstorableReason(data);
  if (unstorable) throw badInput(`invalid ${type} event: data ${unstorable}`, { type });
  const result = schema.safeParse(data);
  if (!result.success) throw badInput(`invalid ${type} event: ${describeIssues(result.error)}`, { type });
  if (version !== CURRENT_FORMAT_VERSION && BOUNDED_SINCE_V4.has(type)) {
    const bounded = codecs[CURRENT_FORMAT_VERSION][type].safeParse(data);
    if (!bounded.success) throw badInput(`invalid ${type} event: ${describeIssues(bounded.error)}`, { type });
  }
  return result.data;
}
