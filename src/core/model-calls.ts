// A model's tool calls as a step records them (docs/contract.md#agent-loop):
// the provider's answer is outside input, so a call whose id or name the log
// cannot hold (its length, or a NUL or unpaired surrogate in it), or whose id
// another call of the step already took, or that names no tool the request
// offered (docs/agents.md#wire-names), is still recorded — under an id and
// name the step can hold — and refused (never run): the model hears why. A
// call reusing the id of an earlier step's call the model is shown (a provider
// refuses a conversation repeating one; some servers number calls per answer)
// runs under a fresh id. Pure.
import type { AnsweredCall } from './chat.ts';
import { toolCallSchema, type ToolCall } from './events.ts';
import { isStorableText, toStorableText } from './storable.ts';

/** The calls to record (every one, ids unique and storable), and why each refused one is not run, by its recorded id. */
export interface AdmittedCalls {
  calls: ToolCall[];
  refused: Map<string, string>;
}

/** The name a call with no storable name is recorded under. */
const UNNAMED = 'unnamed';

/**
 * The result of a call of a tool the model was not offered: by a name no tool of its request went by, or, taken up
 * from the log, of a tool the session's tools do not hold now. The words the runner SDKs answer such a call with.
 */
export const notOfferedContent = (name: string): string => `the model was offered no tool named ${JSON.stringify(name)}: the call did not run`;

/**
 * `earlier`: the ids of the calls the conversation already holds (the request's assistant messages); `offered`: the
 * names of the tools the request offered (a call marked `unoffered` named none of them, whatever its name now).
 */
export function admitCalls(calls: readonly AnsweredCall[], earlier: ReadonlySet<string>, offered: ReadonlySet<string>): AdmittedCalls {
  const ids = new Set<string>();
  const refused = new Map<string, string>();
  // Ids given in place of unusable ones: the call's position, skipping any a call of the step already has.
  const taken = new Set(calls.map((c) => c.id));
  const freshId = (i: number) => {
    let id = `call_${i + 1}`;
    while (taken.has(id) || ids.has(id) || earlier.has(id)) id = `${id}_`;
    return id;
  };
  const out = calls.map(({ unoffered, ...call }, i): ToolCall => {
    const nameFits = toolCallSchema.shape.name.safeParse(call.name).success;
    const nameText = isStorableText(call.name);
    const idFits = toolCallSchema.shape.id.safeParse(call.id).success;
    const idText = isStorableText(call.id);
    const why = !idFits
      ? `the model gave it an id of ${call.id.length} characters (1-200 allowed)`
      : !idText
        ? 'the model gave it an id holding a NUL character or an unpaired surrogate'
        : ids.has(call.id)
          ? `the model gave it the id of another call of this step (${call.id})`
          : !nameFits
            ? `the model named a tool of ${call.name.length} characters (1-200 allowed)`
            : !nameText
              ? 'the model named a tool with a NUL character or an unpaired surrogate'
              : undefined;
    const id = (why && (!idFits || !idText || ids.has(call.id))) || earlier.has(call.id) ? freshId(i) : call.id;
    ids.add(id);
    // Cut at 200 UTF-16 units it may split a pair: made storable after the cut.
    const name = nameFits && nameText ? call.name : toStorableText(call.name.slice(0, 200)) || UNNAMED;
    if (why) refused.set(id, `not run: ${why}`);
    else if (unoffered || !offered.has(name)) refused.set(id, notOfferedContent(name));
    return { ...call, id, name };
  });
  return { calls: out, refused };
}
