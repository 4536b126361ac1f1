// Where `npm start` makes the workspaces by default (agent/workspaces-dir.ts):
// outside the data directory and any git repository, private to forkline's
// OS user; a directory another user owns is refused; an operator is told of a
// directory inside a repository and of the former default left behind.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { defaultWorkspacesDir, enclosingRepository, prepareWorkspacesDir } from '../../src/agent/workspaces-dir.ts';

let repo: string;
beforeAll(() => {
  repo = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-ws-dir-'));
  execFileSync('git', ['init', '-q', repo]);
});
afterAll(() => fs.rmSync(repo, { recursive: true, force: true }));

describe('the workspaces directory', () => {
  it('defaults to one per data directory under the OS temp directory, not under the data directory', () => {
    const dataDir = path.join(repo, '.data');
    const dir = defaultWorkspacesDir(dataDir);
    expect(path.dirname(dir)).toBe(os.tmpdir());
    expect(dir.startsWith(repo)).toBe(false);
    expect(defaultWorkspacesDir(dataDir)).toBe(dir);
    expect(defaultWorkspacesDir(path.join(repo, 'other'))).not.toBe(dir);
    expect(enclosingRepository(path.join(repo, '.data', 'workspaces'))).toBe(repo);
  });

  it('is made private; one inside a repository and a former default left behind are logged', () => {
    const logged: string[] = [];
    const former = path.join(repo, '.data', 'workspaces');
    fs.mkdirSync(former, { recursive: true });
    const outside = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-ws-outside-'));
    try {
      prepareWorkspacesDir(path.join(outside, 'ws'), { formerDefault: former, log: (m) => logged.push(m) });
      expect(fs.statSync(path.join(outside, 'ws')).mode & 0o777).toBe(0o700);
      expect(logged).toEqual([expect.stringMatching(new RegExp(`^${former} is no longer used: workspaces are now made under ${outside}/ws`))]);
    } finally {
      fs.rmSync(outside, { recursive: true, force: true });
    }
    logged.length = 0;
    prepareWorkspacesDir(former, { formerDefault: former, log: (m) => logged.push(m) });
    expect(logged).toEqual([expect.stringContaining(`is inside the git repository ${repo}`)]);
  });

  // Made by chown: the suite runs as root (CI does; .ci/run).
  it("refuses a directory another OS user owns (a shared temp directory's squatter)", () => {
    const squatted = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-ws-squat-'));
    try {
      fs.chownSync(squatted, 65534, 65534);
      expect(() => prepareWorkspacesDir(squatted, { log: () => {} })).toThrow(/belongs to another OS user \(uid 65534\): set FORKLINE_WORKSPACES_DIR/);
    } finally {
      fs.rmSync(squatted, { recursive: true, force: true });
    }
  });
});
