// The docs a clone carries: README is the front door (the two commands first,
// short), every local link resolves, and every setting the service reads is
// documented. A clone has no ../shared: docs/contract.md must stand alone.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../helpers/process.ts';

const read = (file: string) => fs.readFileSync(path.join(PROJECT_ROOT, file), 'utf8');
const docs = ['README.md', 'ARCHITECTURE.md', ...fs.readdirSync(path.join(PROJECT_ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];

describe('docs', () => {
  it('README opens with the two set-up commands and stays a front door', () => {
    const readme = read('README.md');
    const firstBlock = readme.slice(readme.indexOf('```sh'), readme.indexOf('```', readme.indexOf('```sh') + 5));
    expect(firstBlock.split('\n').filter((l) => l && !l.startsWith('```')).map((l) => l.split('#')[0].trim())).toEqual(['npm install && npm start', 'npm test']);
    expect(readme.split('\n').length).toBeLessThan(300);
  });

  it('link only to files that exist, and never outside the repository', () => {
    const broken: string[] = [];
    for (const doc of docs) {
      for (const [, target] of read(doc).matchAll(/\]\(([^)#\s]+)(?:#[^)]*)?\)/g)) {
        if (/^[a-z]+:/.test(target)) continue; // a URL
        const resolved = path.resolve(path.dirname(path.join(PROJECT_ROOT, doc)), target);
        if (!resolved.startsWith(PROJECT_ROOT) || !fs.existsSync(resolved)) broken.push(`${doc} → ${target}`);
      }
      if (read(doc).includes('../shared')) broken.push(`${doc} names ../shared, which a clone does not have`);
    }
    expect(broken).toEqual([]);
  });

  it('document every environment variable the service reads', () => {
    const config = read('src/config.ts');
    const schema = config.slice(config.indexOf('const envSchema'), config.indexOf('export type Config'));
    const variables = [...schema.matchAll(/^\s+([A-Z][A-Z0-9_]+):/gm)].map((m) => m[1]);
    expect(variables.length).toBeGreaterThan(20);
    const documented = docs.map(read).join('\n');
    expect(variables.filter((v) => !documented.includes(`\`${v}\``))).toEqual([]);
  });
});
