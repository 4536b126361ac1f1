// Its own module, so the file workspace (which the tools use) can throw it
// without importing the tool definitions (tests/structure: no import circles).

/** A tool failure the model should see as an `error` result. */
export class ToolError extends Error {
  name = 'ToolError';
}
