// The typed client is generated (`npm run build`) from schema/schema.graphql and
// client/operations/*.graphql into client/generated/ (gitignored). Stale output
// means the client's types lie about the server: regenerate in memory and compare.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { generate } from '@graphql-codegen/cli';
import config from '../../codegen.ts';
import { PROJECT_ROOT } from '../helpers/process.ts';

describe('client/generated', () => {
  it('is what codegen makes of the current schema and operations (run `npm run build`)', async () => {
    const outputs: Array<{ filename: string; content: string }> = await generate({ ...config, cwd: PROJECT_ROOT, silent: true }, false);
    expect(outputs.length).toBeGreaterThan(0);
    for (const { filename, content } of outputs) {
      const file = path.resolve(PROJECT_ROOT, filename);
      expect(fs.existsSync(file), `${filename} is missing: run npm run build`).toBe(true);
      expect(fs.readFileSync(file, 'utf8') === content, `${filename} is stale: run npm run build`).toBe(true);
    }
  }, 30_000);
});
