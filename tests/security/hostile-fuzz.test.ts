// A short fuzz of the file doors (docs/operations.md "Threat model"): tenant
// B sends recordings and runner batches with random paths (`..`, absolute,
// backslashes, NUL, this machine's own directories, long ones), random hashes
// (tenant A's, nobody's, malformed, carried), random sizes and carried
// contents that may not match. Whatever is accepted never names a path the
// file tools refuse, never reads as A's content, and making its files on disk
// writes nothing outside the workspaces' root; a symlink left in a workspace
// leads nowhere either.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { changeSetPathProblem } from '../../src/core/file-tree.ts';
import type { TestApp } from '../helpers/app.ts';
import { A, B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { appendEvents, calledRunnerSession, filesUnder, importRecording, postRecording, recordingOf, runnerFileBatch, sha256 } from './hostile-doors.ts';
import { anyData } from '../helpers/event-data.ts';

const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 100_000);

let app: TestApp;
let base: string;
let root: string;
const secret = 'tenant A only: 7391';
const secretHash = sha256(secret);

/** mulberry32: a small seeded generator (the seed is printed, so a failure replays). */
function random(seed: number) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

beforeAll(async () => {
  base = fs.mkdtempSync(path.join(os.tmpdir(), 'hostile-fuzz-'));
  root = path.join(base, 'ws');
  app = await startTwoTenantApp({ workspacesDir: root });
  const s = await app.gql(`mutation { createSession(input: { title: "A" }) { id } }`, undefined, A);
  await app.gql(
    `mutation($id: ID!, $t: String!) { sendMessage(input: { sessionId: $id, text: $t }) { inputId } }`,
    { id: s.data.createSession.id, t: `!call write_file ${JSON.stringify({ path: 'secret.txt', content: secret })}` },
    A,
  );
  await app.services.host.idle();
});
afterAll(async () => {
  await app.close();
  fs.rmSync(base, { recursive: true, force: true });
});

describe(`fuzzed change sets from tenant B (FUZZ_SEED=${SEED})`, () => {
  it("nothing accepted escapes the workspace or reads as another tenant's content", async () => {
    const rnd = random(SEED);
    const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rnd() * xs.length)];
    const segments = ['..', '.', '', 'a', 'b.txt', 'ü', '%2e%2e', '..\\..', '~', 'link', 'x'.repeat(300), '\u0000', ' ', '...', '.git', 'escape'];
    const randomPath = () => {
      const kind = rnd();
      if (kind < 0.1) return path.join(base, 'escape', `abs${Math.floor(rnd() * 1000)}`);
      if (kind < 0.15) return `${path.relative(path.join(root, 'ses_x'), base)}/escape/rel`;
      const p = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => pick(segments)).join(pick(['/', '/', '//', '\\']));
      return rnd() < 0.1 ? `/${p}` : p;
    };
    const accepted: Array<{ id: string; runner: boolean }> = [];
    for (let i = 0; i < 80; i++) {
      const carried = Array.from({ length: i === 0 ? 1 : Math.floor(rnd() * 3) }, () => Buffer.from(`carried ${rnd()}`));
      const hashes = [secretHash, sha256(`nobody ${rnd()}`), 'zz', ...carried.map((c) => sha256(c))];
      const changes = Array.from({ length: 1 + Math.floor(rnd() * 4) }, (_, k) => {
        // Half the changes are well-formed (the first round's all are): the rest must not spoil what they carry.
        if (carried.length && (i === 0 || rnd() < 0.5)) return { path: `dir${k}/file${i}.txt`, hash: sha256(carried[0]), size: carried[0].byteLength };
        const hash = rnd() < 0.1 ? null : pick(hashes);
        const own = carried.find((c) => sha256(c) === hash);
        const size = rnd() < 0.7 && own ? own.byteLength : pick([0, 1, -1, 2 ** 40, Math.floor(rnd() * 100)]);
        return { path: randomPath(), hash, size };
      });
      // Sometimes a carried content under a hash it does not have.
      const lines = i > 0 && rnd() < 0.1 && carried.length ? [Buffer.from('not what the hash says'), ...carried.slice(1)] : carried;
      let r: { id?: string; runner: boolean };
      if (i % 2 === 0) {
        const text = recordingOf(changes, []);
        const withBlobs = lines.length
          ? `${text}${lines.map((c, k) => JSON.stringify({ blob: sha256(carried[k] ?? c), base64: c.toString('base64') })).join('\n')}\n`
          : text;
        const posted = i % 4 === 0 ? await postRecording(app, withBlobs, B) : undefined;
        const id = posted ? posted.body.session?.id : (await importRecording(app, withBlobs, B)).data?.importRecording?.id;
        if (posted) expect([201, 400]).toContain(posted.status);
        r = { id, runner: false };
      } else {
        const s = await calledRunnerSession(app, B);
        const res = await appendEvents(app, s, runnerFileBatch(changes), B);
        if (res.errors) expect(res.errors[0].extensions?.code).toBe('BAD_USER_INPUT');
        r = { id: res.errors ? undefined : s.id, runner: true };
      }
      if (r.id) accepted.push({ id: r.id, runner: r.runner });
    }
    // Some got through (the doors are not simply shut), and most did not.
    expect(accepted.length).toBeGreaterThan(0);
    expect(accepted.length).toBeLessThan(80);
    for (const { id } of accepted) {
      const read = await app.gql(`query($id: ID!) { session(id: $id) { files { path hash } } }`, { id }, B);
      for (const f of read.data.session.files) {
        expect(changeSetPathProblem(f.path), f.path).toBeUndefined();
        expect(f.hash).not.toBe(secretHash);
        const one = await app.gql(`query($id: ID!, $p: String!) { session(id: $id) { file(path: $p) { text } } }`, { id, p: f.path }, B);
        expect(one.data.session.file?.text).not.toBe(secret);
      }
    }
    // Made on disk (forkline's agent runs the imported ones): every file lands under its own directory.
    for (const { id } of accepted.filter((a) => !a.runner).slice(0, 6)) {
      await app.gql(`mutation($id: ID!) { sendMessage(input: { sessionId: $id, text: "!call list_files {}" }) { inputId } }`, { id }, B);
    }
    await app.services.host.idle();
    expect(fs.readdirSync(base)).toEqual(['ws']);
    for (const f of filesUnder(root)) expect(f.split(path.sep).includes('..'), f).toBe(false);
    expect(filesUnder(root).some((f) => fs.readFileSync(path.join(root, f), 'utf8') === secret && !f.endsWith('secret.txt'))).toBe(false);
  });

  it('a symlink left in a workspace (as a command might) leads no file tool outside', async () => {
    const outside = path.join(base, 'outside');
    fs.mkdirSync(outside, { recursive: true });
    const s = await app.gql(`mutation { createSession(input: { title: "B" }) { id } }`, undefined, B);
    const id = s.data.createSession.id as string;
    const send = async (text: string) => {
      await app.gql(`mutation($id: ID!, $t: String!) { sendMessage(input: { sessionId: $id, text: $t }) { inputId } }`, { id, t: text }, B);
      await app.services.host.idle();
    };
    await send(`!call write_file ${JSON.stringify({ path: 'a.txt', content: 'a' })}`);
    fs.symlinkSync(outside, path.join(root, id, 'ln'));
    fs.symlinkSync(path.join(outside, 'f.txt'), path.join(root, id, 'lf'));
    await send(
      `!call write_file ${JSON.stringify({ path: 'ln/x.txt', content: 'escaped' })}\n!then\n!call write_file ${JSON.stringify({ path: 'lf', content: 'escaped' })}\n!then\n!call read_file {"path":"ln/../../outside/f.txt"}`,
    );
    const results = (await app.services.store.log.page(id, -1, 1000)).filter((e) => e.type === 'tool/result').slice(-3);
    expect(results.map((e) => anyData(e).status)).toEqual(['error', 'error', 'error']);
    expect(fs.readdirSync(outside)).toEqual([]);
    fs.rmSync(outside, { recursive: true });
  });
});
