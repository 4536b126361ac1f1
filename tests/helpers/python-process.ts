// Talking to a forkline server from a test of the Python runner SDK
// (packages/python): GraphQL reads of a service, and `python3 -c` with the
// SDK on its path.
import { spawn } from 'node:child_process';
import path from 'node:path';
import { PROJECT_ROOT, postGraphQL } from './process.ts';

/** `gql` (data, or throws with the errors) and `events` (a session's first 500 events) of the service at `url()`. */
export function serviceReads(url: () => string) {
  const gql = async (query: string, variables?: Record<string, unknown>) => {
    const { body } = await postGraphQL(url(), query, variables);
    if (body.errors) throw new Error(JSON.stringify(body.errors));
    return body.data;
  };
  const events = async (id: string) =>
    (await gql(`query($id: ID!) { session(id: $id) { events(first: 500) { edges { node { seq type data synthetic } } } } }`, { id })).session.events.edges.map(
      (e: any) => e.node,
    );
  return { gql, events };
}

/** Runs `python3 -c script` with the SDK importable; its exit status and output. */
export function runPython(script: string): Promise<{ status: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    const child = spawn('python3', ['-c', script], { env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python') } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => (stdout += c));
    child.stderr.on('data', (c) => (stderr += c));
    child.on('close', (status) => resolve({ status, stdout, stderr }));
  });
}
