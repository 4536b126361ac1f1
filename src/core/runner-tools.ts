// The tools an external runner declares (session/runner-tools) and the effect
// each of its calls is recorded with (docs/runners.md "Runner tools"). Pure.
import { badInput } from './errors.ts';
import type { NewEvent, RunnerTool } from './events.ts';
import type { ToolDefinition } from './chat.ts';

/** A declared tool as a model request or a client lists it. */
export const runnerToolInfo = (t: RunnerTool): ToolDefinition => ({
  name: t.name,
  description: t.description ?? '',
  parameters: t.inputSchema ?? { type: 'object' },
  effect: t.effect,
});

/** A declared set in one spelling (order and absent fields do not make two sets differ). */
function canonical(tools: readonly RunnerTool[]): string {
  const sorted = [...tools].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  return JSON.stringify(sorted.map((t) => [t.name, t.effect, t.description ?? null, sortedKeys(t.inputSchema ?? null)]));
}

function sortedKeys(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(sortedKeys);
  if (v && typeof v === 'object')
    return Object.fromEntries(
      Object.keys(v)
        .sort()
        .map((k) => [k, sortedKeys((v as Record<string, unknown>)[k])]),
    );
  return v;
}

/** Whether `next` declares something other than `current` (none declared yet: anything is new). */
export const runnerToolsDiffer = (current: readonly RunnerTool[] | undefined, next: readonly RunnerTool[]): boolean =>
  current === undefined || canonical(current) !== canonical(next);

/** The names a declared set uses twice (a set names each tool once). */
export function duplicateToolNames(tools: readonly RunnerTool[]): string[] {
  const seen = new Set<string>();
  return tools.flatMap((t) => (seen.has(t.name) ? [t.name] : (seen.add(t.name), [])));
}

/**
 * A runner's batch with each call of a declared tool carrying the declared
 * effect: filled in where the call has none, refused (BAD_USER_INPUT, rule
 * `call effect`) where it names another, or says it works in the file
 * workspace (`files`): a declaration has no file scope, and `files: only` makes
 * repair word a cut-off call as safe to repeat whatever its effect
 * (core/repair.ts), so it would relabel a tool with side effects as safe.
 * `declared` is the set in force before
 * the batch; a session/runner-tools event in it replaces the set for what
 * follows. Calls of tools nobody declared keep what they carry (none: effects
 * unknown, and repair says so). `firstSeq` is the seq the batch starts at.
 */
export function withDeclaredEffects(events: NewEvent[], declared: readonly RunnerTool[] | undefined, firstSeq: number): NewEvent[] {
  let effects = new Map((declared ?? []).map((t) => [t.name, t.effect]));
  return events.map((e, i) => {
    // Not yet decoded (the batch's codec check comes after): read only what is there.
    const data = e.data as { tools?: unknown; toolCalls?: unknown } | null;
    if (e.type === 'session/runner-tools' && Array.isArray(data?.tools)) {
      effects = new Map((data.tools as RunnerTool[]).map((t) => [t?.name, t?.effect]));
      return e;
    }
    if (e.type !== 'model/message' || !Array.isArray(data?.toolCalls) || effects.size === 0) return e;
    const toolCalls = (data.toolCalls as Array<{ name?: unknown; effect?: unknown; files?: unknown } | null>).map((call) => {
      const effect = typeof call?.name === 'string' ? effects.get(call.name) : undefined;
      if (!call || typeof call !== 'object' || !effect) return call;
      if (call.files !== undefined) {
        throw badInput(
          `event ${firstSeq + i} (model/message): call of "${call.name}" says files "${String(call.files)}", ` +
            `but the runner declared "${call.name}" with no file scope (a runner's tools work outside forkline's workspace)`,
          { rule: 'call effect', seq: firstSeq + i },
        );
      }
      if (call.effect === undefined) return { ...call, effect };
      if (call.effect !== effect) {
        throw badInput(
          `event ${firstSeq + i} (model/message): call of "${call.name}" says effect "${String(call.effect)}", but the runner declared "${effect}"`,
          {
            rule: 'call effect',
            seq: firstSeq + i,
          },
        );
      }
      return call;
    });
    return { ...e, data: { ...data, toolCalls } };
  });
}
