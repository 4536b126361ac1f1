// Where `npm start` makes the sessions' file workspaces when
// FORKLINE_WORKSPACES_DIR does not say: outside any git repository (not under
// the data directory, which defaults to .data/ inside the checkout), so `git`
// run by the shell or an MCP server in a workspace never finds forkline's own
// repository. A workspace is a copy of what its log records (docs/files.md):
// moving the default loses nothing, each is made again from Postgres.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** `<OS temp>/forkline-workspaces-<uid>-<hash of the data directory>`: one per instance and OS user. */
export function defaultWorkspacesDir(dataDir: string): string {
  const instance = createHash('sha256').update(path.resolve(dataDir)).digest('hex').slice(0, 12);
  return path.join(os.tmpdir(), `forkline-workspaces-${process.getuid?.() ?? 0}-${instance}`);
}

/** The git repository a directory is inside of, if any (a `.git` in it or above it). */
export function enclosingRepository(dir: string): string | undefined {
  for (let d = path.resolve(dir); ; d = path.dirname(d)) {
    if (fs.existsSync(path.join(d, '.git'))) return d;
    if (path.dirname(d) === d) return undefined;
  }
}

/**
 * Makes the workspaces directory readable by this OS user only (tenants'
 * files), refusing one another user owns (a shared temp directory), and
 * says what an operator should know: a directory inside a git repository, a
 * former default left behind.
 */
export function prepareWorkspacesDir(dir: string, opts: { formerDefault?: string; log: (msg: string) => void }): void {
  fs.mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = fs.lstatSync(dir);
  if (!stat.isDirectory()) throw new Error(`workspaces directory ${dir} is not a directory`);
  const uid = process.getuid?.();
  if (uid !== undefined && stat.uid !== uid)
    throw new Error(`workspaces directory ${dir} belongs to another OS user (uid ${stat.uid}): set FORKLINE_WORKSPACES_DIR`);
  fs.chmodSync(dir, 0o700);
  const repo = enclosingRepository(dir);
  if (repo) {
    opts.log(
      `workspaces directory ${dir} is inside the git repository ${repo}: the shell and MCP servers get GIT_CEILING_DIRECTORIES so git does not find it, ` +
        'but other tools may; unset FORKLINE_WORKSPACES_DIR for the default outside any repository',
    );
  }
  const former = opts.formerDefault && path.resolve(opts.formerDefault);
  if (former && former !== path.resolve(dir) && fs.existsSync(former)) {
    opts.log(`${former} is no longer used: workspaces are now made under ${dir} (each is made again from the database; the old directory may be deleted)`);
  }
}
