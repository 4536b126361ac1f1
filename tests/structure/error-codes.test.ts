// The codes of the service's own limits are written once, in src/core/errors.ts,
// where every room may take them (ARCHITECTURE.md): the schema's plugins and
// the HTTP doors both answer with RESPONSE_TOO_LARGE and
// REQUEST_ENTITY_TOO_LARGE, neither room may import the other (rooms.test.ts),
// and a literal written again in one of them could drift from the other's.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import * as errors from '../../src/core/errors.ts';

const SRC = path.resolve(import.meta.dirname, '../../src');
const HOME = 'core/errors.ts';

function sources(dir: string): string[] {
  return fs.readdirSync(dir, { withFileTypes: true }).flatMap((e) => {
    const p = path.join(dir, e.name);
    return e.isDirectory() ? sources(p) : p.endsWith('.ts') ? [path.relative(SRC, p)] : [];
  });
}

/** The codes core/errors.ts names one by one (its string constants), and the two the doors and the plugins share. */
const codes = [
  ...new Set([
    'RESPONSE_TOO_LARGE',
    'REQUEST_ENTITY_TOO_LARGE',
    ...(Object.values(errors) as unknown[]).filter((v): v is string => typeof v === 'string' && /^[A-Z][A-Z_]+$/.test(v)),
  ]),
];

describe('error codes written once', () => {
  it('each code of a limit is a literal only in core/errors.ts; every other module imports it', () => {
    const written = sources(SRC).flatMap((file) => {
      const text = fs.readFileSync(path.join(SRC, file), 'utf8');
      return codes.filter((code) => ["'", '"', '`'].some((q) => text.includes(`${q}${code}${q}`))).map((code) => `${code} in ${file}`);
    });
    expect(written.sort()).toEqual(codes.map((code) => `${code} in ${HOME}`).sort());
  });
});
