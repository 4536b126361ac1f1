// The docs a clone carries: README is the front door (the two commands first,
// short), every local link resolves, and every setting the service reads is
// documented. A clone has no ../shared: docs/contract.md must stand alone, and
// code comments cite its sections by anchor (docs/contract.md#forks), which resolve.
import fs from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../helpers/process.ts';

const read = (file: string) => fs.readFileSync(path.join(PROJECT_ROOT, file), 'utf8');

/** The files of src/, client/ and tests/ a reader meets (generated output and build artifacts aside). */
function codeFiles(dir: string): string[] {
  return fs.readdirSync(path.join(PROJECT_ROOT, dir), { withFileTypes: true }).flatMap((e) => {
    const rel = `${dir}/${e.name}`;
    if (e.isDirectory()) return ['generated', 'dist', 'artifacts', 'node_modules'].includes(e.name) ? [] : codeFiles(rel);
    return /\.(ts|tsx|mjs|css|md)$/.test(e.name) ? [rel] : [];
  });
}

/** What points outside the repository: the shared design document's sections, issue numbers, decision-record seeds, the shared folder. */
const OUTSIDE_REFERENCES: ReadonlyArray<[RegExp, string]> = [
  [/DESIGN(\.md)? ?§/g, 'a section of the shared design document'],
  [/\b[Ii]ssues? #?\d+/g, 'an issue number'],
  [/\b[Ss]eeds? \d{3}\b/g, 'a decision-record seed'],
  [/(^|[^\w.])shared\//g, 'the shared folder'],
];

/** Each reference in `files` to something outside the repository (empty: none). */
function outsideReferences(files: ReadonlyMap<string, string>): string[] {
  return [...files].flatMap(([file, text]) =>
    OUTSIDE_REFERENCES.flatMap(([pattern, what]) =>
      [...text.matchAll(pattern)].map((m) => `${file}: "${m[0].trim()}" is ${what}: cite docs/contract.md or ARCHITECTURE.md`),
    ),
  );
}

/** The anchors of a markdown page: explicit `<a id>`s and GitHub's heading slugs. */
function anchorsOf(markdown: string): Set<string> {
  const ids = [...markdown.matchAll(/<a id="([^"]+)"><\/a>/g)].map((m) => m[1]);
  const slugs = [...markdown.matchAll(/^#+ (.+)$/gm)].map((m) =>
    m[1]
      .toLowerCase()
      .replace(/[^\w\s-]/g, '')
      .trim()
      .replace(/\s/g, '-'),
  );
  return new Set([...ids, ...slugs]);
}

/** Each `docs/contract.md#<section>` in `files` that names no anchor of the page (empty: all resolve). */
function unresolvedAnchors(files: ReadonlyMap<string, string>, contract: string): string[] {
  const anchors = anchorsOf(contract);
  return [...files].flatMap(([file, text]) =>
    [...text.matchAll(/docs\/contract\.md#([\w-]+)/g)].filter((m) => !anchors.has(m[1])).map((m) => `${file}: docs/contract.md#${m[1]} names no section`),
  );
}
const docs = [
  'README.md',
  'ARCHITECTURE.md',
  ...fs
    .readdirSync(path.join(PROJECT_ROOT, 'docs'))
    .filter((f) => f.endsWith('.md'))
    .map((f) => `docs/${f}`),
];

describe('docs', () => {
  it('README opens with the two set-up commands and stays a front door', () => {
    const readme = read('README.md');
    const firstBlock = readme.slice(readme.indexOf('```sh'), readme.indexOf('```', readme.indexOf('```sh') + 5));
    expect(
      firstBlock
        .split('\n')
        .filter((l) => l && !l.startsWith('```'))
        .map((l) => l.split('#')[0].trim()),
    ).toEqual(['npm install && npm start', 'npm test']);
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

  it('code, client and tests cite only the repository: docs/contract.md sections that exist, ARCHITECTURE.md', () => {
    const files = new Map(['src', 'client', 'tests'].flatMap(codeFiles).map((f) => [f, read(f)] as const));
    expect(files.size).toBeGreaterThan(300);
    expect(outsideReferences(files)).toEqual([]);
    const cited = [...files.values()].join('\n').match(/docs\/contract\.md#[\w-]+/g) ?? [];
    expect(new Set(cited).size).toBeGreaterThan(5);
    expect(unresolvedAnchors(files, read('docs/contract.md'))).toEqual([]);
  });

  it('the citation check sees a reference outside the repository and an anchor that does not resolve', () => {
    // The kinds of reference comments held before they cited the contract (spelt in parts so that this file holds none).
    const files = new Map([
      ['src/a.ts', `// Forks (${'DESIGN'} §3.1, ${'seed'} 000): copy-free.`],
      ['src/b.ts', `// The workspace (${'issue'} 17). See ${'shared'}/DESIGN.md.`],
      ['tests/c.ts', `// Exact forks (docs/contract.md#exact-fork) and branches (docs/contract.md#${'no-such-section'}).`],
    ]);
    // What each finding says, less the text it quotes (which would be a finding here).
    expect(outsideReferences(files).map((r) => r.replace(/: ".*" is /, ': '))).toEqual([
      'src/a.ts: a section of the shared design document: cite docs/contract.md or ARCHITECTURE.md',
      'src/a.ts: a decision-record seed: cite docs/contract.md or ARCHITECTURE.md',
      'src/b.ts: an issue number: cite docs/contract.md or ARCHITECTURE.md',
      'src/b.ts: the shared folder: cite docs/contract.md or ARCHITECTURE.md',
    ]);
    expect(unresolvedAnchors(files, read('docs/contract.md'))).toEqual([`tests/c.ts: docs/contract.md#${'no-such-section'} names no section`]);
  });
});
