// The AI SDK adapter's package installed into an app on ai 7, as a team that
// upgraded gets it (packages.test.ts: the same with the repository's ai 6):
// npm accepts ai 7 for its peer `ai` (an app with ai 7 and a peer range of
// ai 6 fails `npm install` with ERESOLVE); the app keeps one copy of `ai`; a
// TypeScript runner on @ai-sdk/openai 4 (a LanguageModelV4) type-checks
// against the installed declarations; and the app's plain JavaScript runner
// (packaged-app/ai-sdk-runner.mjs, with ai 7's own mock model) serves a real
// forkline server: a turn with a tool call, in a session with instructions.
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PROJECT_ROOT, postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { installPackedApp, versionOf } from '../helpers/packed-app.ts';
import { waitFor } from '../helpers/wait.ts';

const run = promisify(execFile);
let service: ServiceProcess;
const app = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-app-ai7-'));
let runner: ChildProcess | undefined;
/** The aliased installs the repository tests with (`ai-v7`: npm:ai@7.x): the versions the app installs under their own names. */
const aliased = (alias: string) => versionOf(alias).replace(/^npm:.*@/, '');

async function gql(query: string, variables?: Record<string, unknown>) {
  const { body } = await postGraphQL(service.url, query, variables);
  if (body.errors) throw new Error(JSON.stringify(body.errors));
  return body.data;
}

beforeAll(async () => {
  const dependencies = { ai: aliased('ai-v7'), '@ai-sdk/openai': aliased('@ai-sdk/openai-v4'), zod: versionOf('zod'), graphql: versionOf('graphql') };
  Object.assign(dependencies, { 'graphql-ws': versionOf('graphql-ws') });
  const files = ['tests/fixtures/packaged-app/ai-sdk-runner.mjs', 'tests/fixtures/packaged-app/ai7/runner.ts', 'tests/fixtures/packaged-app/ai7/tsconfig.json'];
  await installPackedApp(app, ['client', 'runner', 'ai-sdk'], dependencies, files);
  service = await startService();
}, 600_000);

afterAll(async () => {
  if (runner && runner.exitCode === null && runner.signalCode === null) runner.kill('SIGKILL');
  await service?.stop();
  fs.rmSync(app, { recursive: true, force: true });
});

describe('@forkline/ai-sdk installed into an app on ai 7', () => {
  it('leaves the app one copy of ai, the 7 it asked for', () => {
    const installed = JSON.parse(fs.readFileSync(path.join(app, 'node_modules/ai/package.json'), 'utf8'));
    expect(installed.version).toBe(aliased('ai-v7'));
    expect(fs.existsSync(path.join(app, 'node_modules/@forkline/ai-sdk/node_modules/ai'))).toBe(false);
  });

  it('type-checks a TypeScript runner whose model is @ai-sdk/openai 4 (a LanguageModelV4)', async () => {
    const tsc = path.join(PROJECT_ROOT, 'node_modules/typescript/bin/tsc');
    const checked = await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: app }).then(
      () => '',
      (err: { stdout?: string }) => err.stdout ?? String(err),
    );
    expect(checked).toBe('');
  });

  it('runs a turn with a tool call in a session with instructions', async () => {
    const pool = 'pkg-ai7';
    const child = spawn(process.execPath, ['ai-sdk-runner.mjs'], { cwd: app, env: { ...process.env, FORKLINE_URL: service.url, POOL: pool }, stdio: 'pipe' });
    runner = child;
    let out = '';
    child.stdout!.on('data', (c) => (out += c));
    child.stderr!.on('data', (c) => (out += c));
    const input = { runner: pool, instructions: 'Answer briefly.' };
    const id = (await gql(`mutation($i: CreateSessionInput!) { createSession(input: $i) { id } }`, { i: input })).createSession.id;
    await gql(`mutation($id: ID!) { sendMessage(input: {sessionId: $id, text: "capital of Norway"}) { inputId } }`, { id });
    const events = async () =>
      (await gql(`query($id: ID!) { session(id: $id) { events(first: 100) { edges { node { type data } } } } }`, { id })).session.events.edges.map(
        (e: { node: { type: string; data: Record<string, unknown> } }) => e.node,
      );
    await waitFor(async () => (await events()).some((e: { type: string }) => e.type === 'turn/end'), { what: 'the turn', timeoutMs: 60_000 }).catch(
      async (err) => {
        throw new Error(`${err.message}\nevents: ${JSON.stringify(await events())}\nrunner: ${out}`);
      },
    );
    child.kill('SIGTERM');
    const evs = await events();
    expect(evs.filter((e: { type: string }) => e.type === 'plugin/agent/error')).toEqual([]);
    expect(evs.find((e: { type: string }) => e.type === 'tool/result').data).toMatchObject({ status: 'ok', content: 'result for capital of Norway' });
    expect(evs.filter((e: { type: string }) => e.type === 'model/message').at(-1).data.text).toBe('Found: result for capital of Norway');
    expect(evs.at(-1).data).toMatchObject({ reason: 'completed' });
  });
});
