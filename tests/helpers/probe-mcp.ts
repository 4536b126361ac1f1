// The probe MCP server (tests/fixtures/mcp/probe-server.mjs), or another of the
// fixtures, as a workspace server: started per session in its directory,
// sandboxed (as the shell is, with the project's own code mounted read-only)
// when `sandboxed`.
import { fileURLToPath } from 'node:url';

const PROBE = fileURLToPath(new URL('../fixtures/mcp/probe-server.mjs', import.meta.url));
/** The checkout: the probe's code and its modules, the one host path a sandboxed probe needs. */
export const PROJECT = fileURLToPath(new URL('../..', import.meta.url)).replace(/\/$/, '');

/** The fixture server at `script` (a path) as a workspace server. */
export const workspaceServer = (script: string, sandboxed: boolean) => ({
  command: process.execPath,
  args: [script],
  cwd: '${workspace}',
  workspace: 'also' as const,
  trusted: true,
  tools: {},
  env: {},
  ...(sandboxed ? { sandbox: { readOnly: [PROJECT], network: false } } : {}),
});

export const probeServer = (sandboxed: boolean) => workspaceServer(PROBE, sandboxed);
