// An app outside the repository with the npm packages (packages/*) installed
// as a team gets them: built as `npm run build` builds them (incremental:
// nothing to do when up to date), packed (`npm pack`, what a registry would
// serve), and installed from the tarballs beside the app's own dependencies
// (`npm install --prefer-offline`).
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { PROJECT_ROOT } from './process.ts';

const run = promisify(execFile);
const rootPackage = JSON.parse(fs.readFileSync(path.join(PROJECT_ROOT, 'package.json'), 'utf8'));
/** The version the repository pins for `name`. */
export const versionOf = (name: string): string => rootPackage.dependencies[name] ?? rootPackage.devDependencies[name];

export type Tarball = { name: string; filename: string; files: Array<{ path: string }> };

/** Packs `packages` (folder names under packages/) and installs them with `dependencies` into `app`; its files are copied in. */
export async function installPackedApp(app: string, packages: string[], dependencies: Record<string, string>, files: string[]): Promise<Tarball[]> {
  await run(process.execPath, [path.join(PROJECT_ROOT, 'node_modules/typescript/bin/tsc'), '-b', ...packages.map((p) => `packages/${p}`)], {
    cwd: PROJECT_ROOT,
  });
  const packDir = path.join(app, 'tarballs');
  fs.mkdirSync(packDir);
  const { stdout } = await run('npm', ['pack', '--json', '--pack-destination', packDir, ...packages.flatMap((p) => ['--workspace', `packages/${p}`])], {
    cwd: PROJECT_ROOT,
  });
  const tarballs = JSON.parse(stdout) as Tarball[];
  const all: Record<string, string> = { ...dependencies };
  for (const t of tarballs) all[t.name] = `file:${path.join(packDir, t.filename)}`;
  fs.writeFileSync(path.join(app, 'package.json'), JSON.stringify({ name: 'runner-app', private: true, type: 'module', dependencies: all }, null, 2));
  for (const f of files) fs.copyFileSync(path.join(PROJECT_ROOT, f), path.join(app, path.basename(f)));
  await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error'], { cwd: app, maxBuffer: 16 * 1024 * 1024 });
  return tarballs;
}
