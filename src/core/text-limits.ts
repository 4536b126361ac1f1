// The length limits of what a client may send, without the schemas that
// enforce them (input-rules.ts), so a client such as the dashboard can refuse
// a text before it is sent without bundling zod.
export const MAX_ID_CHARS = 200;
/** A model's name (session/model `model`, ModelConfigInput.model): as long as a name shows whole in the dashboard. */
export const MAX_MODEL_NAME_CHARS = 200;
/** A model provider's name (session/model `provider`). */
export const MAX_PROVIDER_NAME_CHARS = 100;
export const MAX_TITLE_CHARS = 500;
/** A user message (sendMessage, a fork's or edit's queued message, an AG-UI run's user message). */
export const MAX_MESSAGE_CHARS = 200_000;
/** A session's instructions (its system prompt: createSession, setSessionInstructions, an edit's or variant's). */
export const MAX_INSTRUCTIONS_CHARS = 100_000;
/** A response schema a message asks its answer to match (its JSON text: sendMessage's, an edit's or a fork's `responseSchema`). */
export const MAX_RESPONSE_SCHEMA_CHARS = 32_000;
/** The reason given with an approval or denial of a tool call (approveToolCall, denyToolCall). */
export const MAX_APPROVAL_REASON_CHARS = 10_000;
/** Instructions for a compaction's summary (compactSession's, and a plugin/compaction/start's from a recording or a runner). */
export const MAX_COMPACTION_INSTRUCTIONS_CHARS = 4_000;
/** A note's key (note_write, note_read, and a plugin/workspace/write from a recording or a runner). */
export const MAX_NOTE_KEY_CHARS = 200;
/** A note's value (note_write's, and a plugin/workspace/write's from a recording or a runner). */
export const MAX_NOTE_VALUE_CHARS = 100_000;
