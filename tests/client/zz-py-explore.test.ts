import { spawn } from 'node:child_process';
import path from 'node:path';
import { afterAll, beforeAll, it } from 'vitest';
import { PROJECT_ROOT, postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { waitFor } from '../helpers/wait.ts';
let service: ServiceProcess;
beforeAll(async () => { service = await startService({ env: { FORKLINE_RUNNER_MAX_STEP_MS: '20000' } }); });
afterAll(async () => { await service?.stop(); });
async function gql(query: string, variables?: Record<string, unknown>) {
  const { body } = await postGraphQL(service.url, query, variables);
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}
const events = async (id: string) => (await gql(`query($id: ID!) { session(id: $id) { status events(first: 400) { edges { node { seq type data synthetic } } } } }`, { id })).session;
it('explores', async () => {
  const pool = 'explore';
  const asks: Record<string, unknown>[] = JSON.parse(process.env.ASKS!);
  const ids: string[] = [];
  for (const ask of asks) {
    const id = (await gql(`mutation($p: String!) { createSession(input: {runner: $p}) { id } }`, { p: pool })).createSession.id;
    await gql(`mutation($id: ID!, $t: String!) { sendMessage(input: {sessionId: $id, text: $t}) { inputId } }`, { id, t: JSON.stringify(ask) });
    ids.push(id);
  }
  const child = spawn('/usr/bin/time', ['-v', 'python3', path.join(PROJECT_ROOT, 'tests/fixtures/runners/python_hostile.py')], { env: { ...process.env, PYTHONPATH: path.join(PROJECT_ROOT, 'packages/python'), FORKLINE_URL: service.url, POOL: pool }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = ''; child.stdout.on('data', (c) => (out += c)); child.stderr.on('data', (c) => (out += c));
  const t0 = Date.now();
  for (const [i, id] of ids.entries()) {
    await waitFor(async () => (await events(id)).events.edges.some((e: any) => e.node.type === 'turn/end') || null, { timeoutMs: 60000, what: out.slice(-2000) }).catch((e) => console.log('TIMEOUT', String(e).slice(0, 3000)));
    const s = await events(id);
    console.log(JSON.stringify(asks[i]).slice(0, 100), 'status', s.status, 'secs', (Date.now() - t0) / 1000, JSON.stringify(s.events.edges.map((e: any) => [e.node.type, JSON.stringify(e.node.data).slice(0, 300)]).filter((x: any) => x[0] !== 'session/runner-tools').slice(0, 12)));
  }
  child.kill('SIGTERM');
  await new Promise((r) => child.on('close', r));
  console.log(out.split('\n').filter((l) => /Maximum resident|refused|failed|Elapsed/.test(l)).map((l) => l.slice(0, 300)).join('\n'));
}, 300000);
