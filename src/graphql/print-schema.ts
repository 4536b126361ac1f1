// Prints the Pothos schema to schema/schema.graphql (committed; a test fails when stale).
import fs from 'node:fs';
import { fileURLToPath } from 'node:url';
import { lexicographicSortSchema, printSchema } from 'graphql';
import { schema } from './schema.ts';

export const SCHEMA_FILE = fileURLToPath(new URL('../../schema/schema.graphql', import.meta.url));
export const printedSchema = () => `${printSchema(lexicographicSortSchema(schema))}\n`;

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  fs.writeFileSync(SCHEMA_FILE, printedSchema());
  console.log(`wrote ${SCHEMA_FILE}`);
}
