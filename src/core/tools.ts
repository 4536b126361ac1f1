/** What running a tool may do to the world; drives retry advice after repair. */
export type ToolEffect = 'read-only' | 'idempotent' | 'side-effects';

/** Looks up a tool's declared effect by name; undefined for an unknown tool. */
export type ToolEffectLookup = (toolName: string) => ToolEffect | undefined;
