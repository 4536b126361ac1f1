// The npm packages (packages/*) as a team gets them: each is packed (`npm
// pack`, what a registry would serve), the tarballs are installed into a fresh
// app in a temp dir outside the repository with its own `ai` and
// `@openai/agents` (`npm install --prefer-offline`), and that app's plain
// JavaScript runners serve a real forkline server: a turn with a tool call
// each. The frameworks are peer dependencies: the app has one copy of each,
// so settings the app makes on its SDK (its OpenAI client) are the adapter's.
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { installPackedApp, versionOf, type Tarball } from '../helpers/packed-app.ts';
import { waitFor } from '../helpers/wait.ts';

const PACKAGES = ['client', 'runner', 'ai-sdk', 'openai-agents'];

let service: ServiceProcess;
const app = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-app-'));
const runners: ChildProcess[] = [];
let tarballs: Tarball[];

async function gql(query: string, variables?: Record<string, unknown>) {
  const { body } = await postGraphQL(service.url, query, variables);
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}
const events = async (id: string) =>
  (await gql(`query($id: ID!) { session(id: $id) { events(first: 100) { edges { node { type data } } } } }`, { id })).session.events.edges.map(
    (e: any) => e.node,
  );

/** Directories holding a copy of `name` anywhere under the app's node_modules. */
function copiesOf(name: string): string[] {
  const found: string[] = [];
  const walk = (dir: string) => {
    for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
      if (!entry.isDirectory() || entry.name === '.bin') continue;
      const full = path.join(dir, entry.name);
      if (entry.name.startsWith('@')) {
        for (const scoped of fs.readdirSync(full, { withFileTypes: true }))
          if (scoped.isDirectory()) visit(path.join(full, scoped.name), `${entry.name}/${scoped.name}`);
      } else visit(full, entry.name);
    }
  };
  const visit = (dir: string, pkg: string) => {
    if (pkg === name) found.push(dir);
    const nested = path.join(dir, 'node_modules');
    if (fs.existsSync(nested)) walk(nested);
  };
  walk(path.join(app, 'node_modules'));
  return found;
}

beforeAll(async () => {
  const dependencies: Record<string, string> = {};
  for (const dep of ['ai', '@openai/agents', 'zod', 'graphql', 'graphql-ws']) dependencies[dep] = versionOf(dep);
  const files = ['ai-sdk-runner.mjs', 'agents-runner.mjs'].map((f) => `tests/fixtures/packaged-app/${f}`);
  tarballs = await installPackedApp(app, PACKAGES, dependencies, files);
  service = await startService();
}, 600_000);

afterAll(async () => {
  for (const r of runners) if (r.exitCode === null && r.signalCode === null) r.kill('SIGKILL');
  await service?.stop();
  fs.rmSync(app, { recursive: true, force: true });
});

function startAppRunner(script: string, pool: string) {
  const child = spawn(process.execPath, [script], {
    cwd: app,
    env: { ...process.env, FORKLINE_URL: service.url, POOL: pool },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  runners.push(child);
  return { child, output: () => out };
}

async function turnThrough(script: string, pool: string) {
  const runner = startAppRunner(script, pool);
  const id = (await gql(`mutation($pool: String!) { createSession(input: {runner: $pool}) { id } }`, { pool })).createSession.id;
  await gql(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "capital of Norway"}) { inputId } }`, { id });
  await waitFor(async () => (await events(id)).some((e: any) => e.type === 'turn/end'), { what: 'the turn', timeoutMs: 60_000 }).catch(async (err) => {
    throw new Error(`${err.message}\nevents: ${JSON.stringify(await events(id))}\nrunner: ${runner.output()}`);
  });
  runner.child.kill('SIGTERM');
  return events(id);
}

describe('the packages installed from their tarballs into an app outside the repository', () => {
  it('are JavaScript with type declarations, nothing else of the repository', () => {
    expect(tarballs.map((t) => t.name).sort()).toEqual(['@forkline/ai-sdk', '@forkline/client', '@forkline/openai-agents', '@forkline/runner']);
    for (const t of tarballs) {
      const files = t.files.map((f) => f.path);
      const entry = t.name.replace('@forkline/', '');
      expect(files).toEqual(expect.arrayContaining(['package.json', `dist/${entry}.js`, `dist/${entry}.d.ts`]));
      expect(
        files.every((f) => /^(package\.json|README\.md|dist\/|src\/)/.test(f)),
        files.join(', '),
      ).toBe(true);
    }
    const installed = JSON.parse(fs.readFileSync(path.join(app, 'node_modules/@forkline/client/package.json'), 'utf8'));
    expect(fs.existsSync(path.join(app, 'node_modules/@forkline/client', installed.exports['.'].types))).toBe(true);
    expect(fs.realpathSync(path.join(app, 'node_modules/@forkline/runner')).startsWith(fs.realpathSync(app))).toBe(true); // a copy, not a link into the repo
  });

  it('leave the app one copy of each framework (peer dependencies)', () => {
    for (const name of ['ai', '@openai/agents', '@openai/agents-core', 'graphql', 'graphql-ws', '@forkline/client', '@forkline/runner']) {
      expect(copiesOf(name), name).toHaveLength(1);
    }
  });

  it('run a turn with the AI SDK adapter', async () => {
    const all = await turnThrough('ai-sdk-runner.mjs', 'pkg-ai');
    const evs = all.filter((e: any) => e.type !== 'session/runner-tools'); // declared by adapters that declare their tools
    expect(evs.map((e: any) => e.type)).toEqual([
      'inbox/add',
      'inbox/remove',
      'turn/start',
      'step/start',
      'model/message',
      'tool/result',
      'step/end',
      'step/start',
      'model/message',
      'step/end',
      'turn/end',
    ]);
    expect(evs[5].data).toMatchObject({ status: 'ok', content: 'result for capital of Norway', name: 'lookup' });
    expect(evs.at(-1).data).toMatchObject({ reason: 'completed' });
  });

  it('run a turn with the OpenAI Agents adapter', async () => {
    const evs = await turnThrough('agents-runner.mjs', 'pkg-agents');
    expect(evs.find((e: any) => e.type === 'tool/result').data).toMatchObject({ status: 'ok', content: 'result for capital of Norway' });
    expect(evs.filter((e: any) => e.type === 'model/message').at(-1).data.text).toBe('Found: result for capital of Norway');
    expect(evs.at(-1).data).toMatchObject({ reason: 'completed' });
  });
});
