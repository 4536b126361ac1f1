// Call ids and tool names as model providers take them (docs/contract.md#append-rules,
// docs/agents.md "Ids and names on the wire"). The log keeps a call's id and a tool's name as they came
// (a model, a recording, a runner, an MCP server's tools/list); what a request
// sends is a form every provider forkline speaks accepts, derived from it alone
// and read back from the answer. Pure.
import { createHash } from 'node:crypto';
import type { ChatMessage } from './chat.ts';

/**
 * A call id every provider takes: OpenAI Chat Completions refuses a
 * `tool_calls[].id` over 40 characters, the Responses API a `call_id` over 64,
 * Anthropic a `tool_use.id` outside `^[a-zA-Z0-9_-]+$`.
 */
export const WIRE_ID = /^[a-zA-Z0-9_-]{1,40}$/;
const WIRE_ID_MAX = 40;

/**
 * A tool name every provider takes: OpenAI's function names are
 * `^[a-zA-Z0-9_-]{1,64}$` (in `tools` and in a history's `tool_calls`),
 * Anthropic's `^[a-zA-Z0-9_-]{1,128}$`, Gemini's start with a letter or `_`
 * and are at most 64 characters.
 */
export const WIRE_TOOL_NAME = /^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$/;
const WIRE_TOOL_NAME_MAX = 64;

/** Characters of the digest a changed id or name carries: two different originals never meet (96 bits, no one finds a pair). */
const DIGEST_CHARS = 16;

/** A digest of text in wire characters (base64url: letters, digits, `-`, `_`). */
const digest = (text: string) => createHash('sha256').update(text).digest('base64url').slice(0, DIGEST_CHARS);

/** `lead`, the original in wire characters (each other UTF-16 unit `_`), cut, then `_<digest of the original>`: `limit` long at most. */
function derived(original: string, limit: number, lead = ''): string {
  const room = limit - 1 - DIGEST_CHARS - lead.length;
  return `${lead}${original.slice(0, room).replace(/[^a-zA-Z0-9_-]/g, '_')}_${digest(original)}`;
}

/**
 * The id a call is sent under: its own when providers take it, else its
 * characters providers take (others `_`, cut) with a digest of the whole id,
 * so two different ids never become one (`toolu 1` → `toolu_1_<digest>`).
 */
export const wireId = (id: string): string => (WIRE_ID.test(id) ? id : derived(id, WIRE_ID_MAX));

/**
 * `base` (a wire id) with `suffix` (wire characters) after it, cut so that the
 * whole is still a wire id: what a call is sent under when another call of the
 * request already goes by its id (core/model-request.ts SentCallIds).
 */
export function wireIdWith(base: string, suffix: string): string {
  if (suffix.length > WIRE_ID_MAX / 2) suffix = `_${digest(suffix)}`;
  return `${base.slice(0, WIRE_ID_MAX - suffix.length)}${suffix}`;
}

/**
 * The name a tool is offered and its calls are shown under: its own when
 * providers take it, else its characters providers take (others `_`, a `_`
 * before a first character that is no letter) with a digest of the whole name
 * (`fs__files.read` → `fs__files_read_<digest>`). A name's wire form never
 * depends on the other tools; two tools whose forms meet are told apart by
 * WireToolNames.
 */
export const wireToolName = (name: string): string =>
  WIRE_TOOL_NAME.test(name) ? name : derived(name, WIRE_TOOL_NAME_MAX, /^[a-zA-Z_]/.test(name) ? '' : '_');

/**
 * The tools of one request by their wire names, and the way back from the
 * name an answer's call uses to the tool's own. Names are taken in the order
 * given (the built-ins first): a later tool whose wire name an earlier one
 * already has is not offered (`left`), so an answer's name always means one
 * tool.
 */
export class WireToolNames {
  private readonly real = new Map<string, string>();
  /** The tools not offered: their wire name is another's. */
  readonly left: string[] = [];

  constructor(names: Iterable<string>) {
    for (const name of names) {
      const wire = wireToolName(name);
      if (this.real.has(wire)) this.left.push(name);
      else this.real.set(wire, name);
    }
  }

  /** Whether a tool is offered under its wire name. */
  offers(name: string): boolean {
    return this.real.get(wireToolName(name)) === name;
  }

  /**
   * The tool an answer's call names: the offered tool of that wire name; undefined for any other name (another
   * tool's own name, a tool left out, another case): no tool was offered under it.
   */
  toolOf(wireName: string): string | undefined {
    return this.real.get(wireName);
  }
}

/**
 * The tool names of a request whose wire form is not the name itself, with
 * that form: the request's tools first, then the names of its history's calls.
 * What an external runner, building its provider request from
 * `ModelRequest` (docs/runners.md#wire-names), sends instead of each name and
 * reads its answer's names back by.
 */
export function wireToolNamesOf(messages: readonly ChatMessage[], tools: readonly { name: string }[]): Array<{ name: string; wireName: string }> {
  const names = new Set(tools.map((t) => t.name));
  for (const m of messages) if (m.role === 'assistant') for (const c of m.tool_calls ?? []) names.add(c.function.name);
  return [...names].flatMap((name) => {
    const wireName = wireToolName(name);
    return wireName === name ? [] : [{ name, wireName }];
  });
}
