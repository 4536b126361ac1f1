// The JSON Schema drafts a message's response schema may name (docs/agents.md "Structured output"): read where the
// schema comes in (structured-output.ts) and by the schema worker that compiles it (response-schema-validators.ts),
// which the process's main thread does not load.

/** Draft-07 or -06: what zod, Pydantic and most tools emit; compiled by Ajv's draft-07 compiler. */
export const DRAFT_7 = /^https?:\/\/json-schema\.org\/draft-0[67]\/schema#?$/;

/** Draft 2020-12, the default when a schema names none. */
export const DRAFT_2020 = /^https?:\/\/json-schema\.org\/draft\/2020-12\/schema#?$/;
