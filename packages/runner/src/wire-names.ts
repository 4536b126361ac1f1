// A request's tool names on the wire (docs/runners.md#wire-names): what an
// adapter sends instead of each name that providers refuse as it is, and how it
// reads its answer's calls back. The forms are forkline's
// (ModelRequest.wireToolNames, derived by the server as its own agent derives
// them), so the log keeps the real names and a runner's requests and forkline's
// own send the same.
import type { ModelRequest } from './runner.ts';

/**
 * Names every provider takes as they are (forkline's rule, docs/agents.md#wire-names). It only tells a runner
 * whether one of its tools needs the server's form before its first request; the form itself is the server's.
 */
const PROVIDER_TOOL_NAME = /^[a-zA-Z_][a-zA-Z0-9_-]{0,63}$/;

/** Whether some of these tool names are not sent as they are: their forms come with a request that lists them. */
export const needsWireNames = (names: Iterable<string>): boolean => [...names].some((name) => !PROVIDER_TOOL_NAME.test(name));

export class RequestWireNames {
  private readonly wire: Map<string, string>;
  /** The offered tools by the name they go by on the wire. */
  private readonly real = new Map<string, string>();

  /**
   * `offered`: the tools the runner offers the model, in order. Of two whose
   * forms meet, only the first is offered, so an answer's name always means
   * one tool.
   */
  constructor(request: Pick<ModelRequest, 'wireToolNames'>, offered: Iterable<string>) {
    this.wire = new Map(request.wireToolNames.map((w) => [w.name, w.wireName]));
    for (const name of offered) if (!this.real.has(this.wireName(name))) this.real.set(this.wireName(name), name);
  }

  /** The name a tool is offered and its calls are shown under: its form in the request, else its own. */
  wireName(name: string): string {
    return this.wire.get(name) ?? name;
  }

  /** Whether the tool is offered (no earlier tool goes by its wire name). */
  offers(name: string): boolean {
    return this.real.get(this.wireName(name)) === name;
  }

  /** The tool an answer's call names: the offered tool of that wire name, else the name as the model wrote it (a tool the runner lacks). */
  toolOf(wireName: string): string {
    return this.real.get(wireName) ?? wireName;
  }
}
