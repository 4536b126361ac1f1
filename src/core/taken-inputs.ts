// Inputs taken from the inbox whose turn had not started: what a fork cut
// between an input's inbox/remove ("taken") and its turn/start leaves in its
// child. Nothing is open at such a cut, so repair adds nothing
// (docs/contract.md#repair, rule 6) and the child's inbox does not hold the
// input: nothing in the child answers it unless it is sent again. Pure: the
// dashboard and the CLI say so from the events they read.

export interface TakenInput {
  /** Its inbox/add. */
  seq: number;
  inputId: string;
  text: string;
}

/** An event as a reader holds it (a dashboard's, a CLI's page). */
interface SeenEvent {
  seq: number;
  type: string;
  data: unknown;
}

const str = (v: unknown) => (typeof v === 'string' ? v : v == null ? '' : JSON.stringify(v));

/** Inputs taken from the inbox (inbox/remove "taken") whose turn/start has not come yet, as events are seen in order. */
export class TakenInputs {
  private readonly added = new Map<string, TakenInput>();
  private readonly taken = new Map<string, TakenInput>();

  see(e: SeenEvent) {
    const d = (e.data ?? {}) as Record<string, unknown>;
    const inputId = str(d.inputId);
    if (e.type === 'inbox/add') this.added.set(inputId, { seq: e.seq, inputId, text: str(d.text) });
    else if (e.type === 'inbox/remove') {
      // Its inbox/add may lie before the events seen: the text is then unknown.
      if (d.reason === 'taken') this.taken.set(inputId, this.added.get(inputId) ?? { seq: -1, inputId, text: '' });
      this.added.delete(inputId);
    } else if (e.type === 'turn/start') this.taken.delete(inputId);
    else if (e.type === 'session/end-seed') {
      // The log after a marker never starts their turns: its marker names them, a later cut does not again.
      this.atMarker = this.unstarted();
      this.taken.clear();
    }
  }

  /** Those left so at the last session/end-seed seen. */
  atMarker: TakenInput[] = [];

  unstarted(): TakenInput[] {
    return [...this.taken.values()];
  }
}

/** Events looked back from a cut for an input taken but unstarted (its turn/start follows its removal at once). */
export const TAKEN_LOOKBACK = 50;

/** The inputs a fork at `seq` would leave taken but unstarted, from the events held (`get`) just before the cut. */
export function takenUnstartedAt(get: (seq: number) => SeenEvent | undefined, seq: number): TakenInput[] {
  const taken = new TakenInputs();
  for (let s = Math.max(0, seq - TAKEN_LOOKBACK); s <= seq; s++) {
    const e = get(s);
    if (e) taken.see(e);
  }
  return taken.unstarted();
}
