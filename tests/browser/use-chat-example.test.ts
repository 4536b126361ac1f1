// The useChat example (client/examples/use-chat, docs/api.md "useChat") built
// with vite, served beside a real forkline process, driven in Chromium: send
// and stream, reload mid-answer and see it resume, regenerate (a branch that
// then answers the chat), and a server killed mid-answer: after the restart
// the reloaded page says the turn was interrupted and the next message is
// answered. And tool approval: a call that waits shows Approve and Deny;
// Approve runs it and the answer follows, Deny shows the denial and the answer.
// Each case runs on both builds of the page: ai 6 with @ai-sdk/react 3 (the
// repository's), and ai 7 with @ai-sdk/react 4 (vite.ai7.config.ts). On ai 7
// alone: a stream the network cut is reconnected once the page is visible
// again, and rebuilt from forkline's replay.
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import pg from 'pg';
import { createTestDatabase } from '../helpers/db.ts';
import { PROJECT_ROOT, postGraphQL, startService, type ServiceProcess } from '../helpers/process.ts';
import { collectPageErrors, launchChromium } from './chromium.ts';

const EXAMPLE = path.join(PROJECT_ROOT, 'client/examples/use-chat');
const TIMEOUT = { timeout: 30_000 };

let browser: Browser;
let pageServer: http.Server;
let pageOrigin: string;
let service: ServiceProcess | undefined;
let port: number;
let databaseUrl: string;
let dataDir: string;

const freePort = () =>
  new Promise<number>((resolve) => {
    const s = net.createServer().listen(0, '127.0.0.1', () => {
      const { port } = s.address() as net.AddressInfo;
      s.close(() => resolve(port));
    });
  });

async function startForkline() {
  service = await startService({
    env: { DATABASE_URL: databaseUrl, FORKLINE_DATA_DIR: dataDir, PORT: String(port), FORKLINE_CORS_ORIGINS: pageOrigin },
  });
}

beforeAll(async () => {
  // The example is built here from its source (vite build), so the page tested is the page in the repository: dist/
  // (ai 6), then dist/ai7/ (ai 7; the first build empties dist/).
  for (const config of ['vite.config.ts', 'vite.ai7.config.ts'])
    execFileSync(process.execPath, [path.join(PROJECT_ROOT, 'node_modules/vite/bin/vite.js'), 'build', '--config', path.join(EXAMPLE, config)], {
      cwd: PROJECT_ROOT,
      stdio: 'pipe',
    });
  const dist = path.join(EXAMPLE, 'dist');
  // The page's own origin (a static server); forkline allows it as a CORS origin.
  pageServer = http.createServer((req, res) => {
    const file = path.join(dist, path.normalize(decodeURIComponent((req.url ?? '/').split('?')[0])).replace(/^(\.\.[/\\])+/, ''));
    const found = fs.existsSync(file) && fs.statSync(file);
    const target = found && found.isFile() ? file : path.join(found && found.isDirectory() ? file : dist, 'index.html');
    res.writeHead(200, { 'content-type': target.endsWith('.js') ? 'text/javascript' : 'text/html' }).end(fs.readFileSync(target));
  });
  await new Promise<void>((r) => pageServer.listen(0, '127.0.0.1', () => r()));
  pageOrigin = `http://127.0.0.1:${(pageServer.address() as net.AddressInfo).port}`;
  databaseUrl = await createTestDatabase();
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-use-chat-'));
  fs.chmodSync(dataDir, 0o755);
  port = await freePort();
  await startForkline();
  browser = await launchChromium();
}, 120_000);
afterAll(async () => {
  await browser?.close();
  await service?.stop('SIGKILL');
  pageServer?.close();
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const turnCount = async (sessionId: string) =>
  (await postGraphQL(service!.url, 'query($id: ID!) { session(id: $id) { turnCount parent { id } } }', { id: sessionId })).body.data.session as {
    turnCount: number;
    parent: { id: string } | null;
  };

async function send(page: Page, text: string) {
  await page.getByLabel('Message').fill(text);
  await page.getByRole('button', { name: 'Send' }).click();
}
/**
 * Records, in the page, the UI message chunks of each POST /chat answer as they arrive (the response's body teed
 * before the AI SDK's transport reads it): `window.chatAnswers`, one entry per request, with its trigger.
 */
const recordChatAnswers = (page: Page) =>
  page.addInitScript(() => {
    type Answer = { trigger: string; chunks: Array<{ at: number; chunk: { type: string; delta?: string } }> };
    const answers: Answer[] = [];
    (window as unknown as { chatAnswers: Answer[] }).chatAnswers = answers;
    const fetchOf = window.fetch.bind(window);
    window.fetch = async (input, init) => {
      const res = await fetchOf(input, init);
      const url = new URL(typeof input === 'string' ? input : input instanceof URL ? input.href : input.url, location.href);
      if (init?.method !== 'POST' || !url.pathname.endsWith('/chat') || !res.body) return res;
      const answer: Answer = { trigger: JSON.parse(String(init.body)).trigger, chunks: [] };
      answers.push(answer);
      const [mine, theirs] = res.body.tee();
      void (async () => {
        const reader = mine.pipeThrough(new TextDecoderStream()).getReader();
        let buffered = '';
        for (;;) {
          const { value, done } = await reader.read();
          if (done) return;
          buffered += value;
          for (let end = buffered.indexOf('\n\n'); end >= 0; end = buffered.indexOf('\n\n')) {
            const data = buffered.slice(0, end).replace(/^data: /, '');
            buffered = buffered.slice(end + 2);
            if (data !== '[DONE]') answer.chunks.push({ at: performance.now(), chunk: JSON.parse(data) });
          }
        }
      })();
      return new Response(theirs, { status: res.status, statusText: res.statusText, headers: res.headers });
    };
  });

const lastAnswer = (page: Page) => page.locator('article[data-role="assistant"]').last();
const ready = (page: Page) => page.locator('main[data-status="ready"]').waitFor(TIMEOUT);

describe.each([
  { sdk: 'ai 6, @ai-sdk/react 3', build: '' },
  { sdk: 'ai 7, @ai-sdk/react 4', build: 'ai7/' },
])('the useChat example ($sdk)', ({ build }) => {
  const chatId = (name: string) => `${build.replace('/', '-')}${name}`;
  it('sends, streams, resumes after a reload, regenerates, and survives a server restart mid-answer', async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(30_000);
    const errors = collectPageErrors(page);
    await page.goto(`${pageOrigin}/${build}?chat=${chatId('browser-chat')}&api=${encodeURIComponent(`http://127.0.0.1:${port}/chat`)}`);

    // Send: the answer streams into an assistant message.
    await send(page, 'hello there');
    await page.locator('article[data-role="assistant"]', { hasText: 'Echo: hello there' }).waitFor(TIMEOUT);
    await ready(page);
    const sessionId = (await lastAnswer(page).getAttribute('data-session'))!;
    expect(sessionId).toMatch(/^ses_chat/);

    // Reload mid-answer: the new page resumes the same answer (GET /chat/<id>/stream) and sees it to its end.
    const words = 'alpha beta gamma delta epsilon zeta eta theta iota kappa lambda';
    // Slow enough (about 6 s) that the reload lands mid-answer on a busy machine.
    await send(page, `${words}\n!slow 500`);
    await page.locator('article[data-role="assistant"]', { hasText: 'Echo: alpha' }).waitFor(TIMEOUT);
    const partial = (await lastAnswer(page).textContent())!;
    expect(partial.length).toBeLessThan(`Echo: ${words}`.length);
    await page.reload();
    await page.locator('article[data-role="assistant"]', { hasText: `Echo: ${words}` }).waitFor(TIMEOUT);
    await ready(page);
    expect((await turnCount(sessionId)).turnCount).toBe(2); // resumed, not sent again

    // Regenerate: a branch of the chat's session answers the same message again, and answers the chat from then on.
    await page.getByRole('button', { name: 'Regenerate' }).click();
    await page.waitForFunction(
      (id) => {
        const answers = document.querySelectorAll('article[data-role="assistant"]');
        const last = answers[answers.length - 1];
        return (
          last && last.getAttribute('data-session') && last.getAttribute('data-session') !== id && document.querySelector('main')?.dataset.status === 'ready'
        );
      },
      sessionId,
      TIMEOUT,
    );
    const branchId = (await lastAnswer(page).getAttribute('data-session'))!;
    expect(await lastAnswer(page).textContent()).toBe(`Echo: ${words}`);
    expect(await turnCount(branchId)).toEqual({ turnCount: 2, parent: { id: sessionId } });

    // The server dies mid-answer; after a restart the reloaded page says the turn was interrupted.
    // About 10 s: the kill lands mid-answer, since the answer streams from its first word (a POST /chat that
    // subscribed after its turn started showed the whole answer at its end, and the kill came after it).
    const counted = 'one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen eighteen nineteen twenty';
    await send(page, `${counted}\n!slow 500`);
    await page.locator('article[data-role="assistant"]', { hasText: 'Echo: one' }).waitFor(TIMEOUT);
    expect((await lastAnswer(page).textContent())!.length).toBeLessThan(`Echo: ${counted}`.length);
    await service!.stop('SIGKILL');
    await startForkline();
    await page.reload();
    await page.getByRole('alert').filter({ hasText: 'interrupted' }).waitFor(TIMEOUT);
    await send(page, 'after the restart');
    await page.locator('article[data-role="assistant"]', { hasText: 'Echo: after the restart' }).waitFor(TIMEOUT);
    await ready(page);
    expect((await turnCount(branchId)).turnCount).toBe(4);
    // The page's only errors are the failed requests of the killed server.
    expect(errors.filter((e) => !/Failed to load resource|ERR_|network/i.test(e))).toEqual([]);
  }, 180_000);

  it('regenerate() streams the branch’s answer delta by delta, none lost, none twice, even when the chat’s session is slow to write', async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(30_000);
    const errors = collectPageErrors(page);
    await recordChatAnswers(page);
    await page.goto(`${pageOrigin}/${build}?chat=${chatId('regenerate-chat')}&api=${encodeURIComponent(`http://127.0.0.1:${port}/chat`)}`);
    const words = 'alpha beta gamma delta epsilon zeta eta theta';
    await send(page, `${words}\n!slow 300`);
    await page.locator('article[data-role="assistant"]', { hasText: `Echo: ${words}` }).waitFor(TIMEOUT);
    await ready(page);
    const sessionId = (await lastAnswer(page).getAttribute('data-session'))!;

    // Another transaction holds the chat's session row (as a busy database may), so the door's write there (the chat's
    // head) waits, while the branch itself is forked at once: whatever the door does after forking comes late. Held
    // until the branch's turn has begun a step, or for 2 s if it has not (it may not begin before the door listens).
    const db = new pg.Client({ connectionString: databaseUrl });
    await db.connect();
    try {
      await db.query('BEGIN');
      await db.query('SELECT 1 FROM "Session" WHERE id = $1 FOR NO KEY UPDATE', [sessionId]);
      await page.getByRole('button', { name: 'Regenerate' }).click();
      const branchEvents = async () => {
        const r = await postGraphQL(
          service!.url,
          'query($id: ID!) { session(id: $id) { children(first: 10) { edges { node { events(first: 50) { edges { node { type } } } } } } } }',
          { id: sessionId },
        );
        expect(r.body.errors).toBeUndefined();
        return (r.body.data.session.children.edges as Array<{ node: { events: { edges: Array<{ node: { type: string } }> } } }>).flatMap((c) =>
          c.node.events.edges.map((e) => e.node.type),
        );
      };
      await expect.poll(async () => (await branchEvents()).includes('session/end-seed'), TIMEOUT).toBe(true);
      const until = Date.now() + 2_000;
      while (Date.now() < until && !(await branchEvents()).includes('step/start')) await new Promise((r) => setTimeout(r, 50));
    } finally {
      await db.query('COMMIT').catch(() => {});
      await db.end();
    }
    await page.waitForFunction(
      (id) => {
        const answers = document.querySelectorAll('article[data-role="assistant"]');
        const last = answers[answers.length - 1];
        return last?.getAttribute('data-session') && last.getAttribute('data-session') !== id && document.querySelector('main')?.dataset.status === 'ready';
      },
      sessionId,
      TIMEOUT,
    );
    expect(await lastAnswer(page).textContent()).toBe(`Echo: ${words}`);

    // The regenerated answer's text came word by word, as the model wrote it: each delta its own chunk, spread over
    // the answer's time (a stream attached after the step began would carry the stored text whole, at its end).
    const answers = await page.evaluate(
      () =>
        (window as unknown as { chatAnswers: Array<{ trigger: string; chunks: Array<{ at: number; chunk: { type: string; delta?: string } }> }> }).chatAnswers,
    );
    const regenerated = answers.filter((a) => a.trigger === 'regenerate-message');
    expect(regenerated).toHaveLength(1);
    const deltas = regenerated[0].chunks.filter((c) => c.chunk.type === 'text-delta');
    const expected = `Echo: ${words}`.match(/\S+\s*/g)!;
    expect(deltas.map((c) => c.chunk.delta)).toEqual(expected);
    expect(deltas.at(-1)!.at - deltas[0].at).toBeGreaterThan(((expected.length - 1) * 300) / 3);
    expect(errors).toEqual([]);
  }, 120_000);

  it('approves a call with Approve, and denies one with Deny', async () => {
    const page = await browser.newPage();
    page.setDefaultTimeout(30_000);
    const errors = collectPageErrors(page);
    await page.goto(`${pageOrigin}/${build}?chat=${chatId('approval-chat')}&api=${encodeURIComponent(`http://127.0.0.1:${port}/chat`)}`);
    await send(page, 'hi');
    await page.locator('article[data-role="assistant"]', { hasText: 'Echo: hi' }).waitFor(TIMEOUT);
    await ready(page);
    const sessionId = (await lastAnswer(page).getAttribute('data-session'))!;
    const set = await postGraphQL(service!.url, 'mutation($i: SetSessionToolApprovalInput!) { setSessionToolApproval(input: $i) { id } }', {
      i: { sessionId, tools: ['note_write'] },
    });
    expect(set.body.errors).toBeUndefined();
    const log = async () =>
      (
        await postGraphQL(service!.url, 'query($id: ID!) { session(id: $id) { status events(first: 200) { edges { node { type data } } } } }', {
          id: sessionId,
        })
      ).body.data.session as { status: string; events: { edges: Array<{ node: { type: string; data: Record<string, unknown> } }> } };

    // Asked: the call waits, the page shows Approve; clicking it runs the tool and the answer streams into the same message.
    await send(page, '!call note_write {"key": "colour", "value": "blue"}');
    const approve = page.getByRole('button', { name: 'Approve' });
    await approve.waitFor(TIMEOUT);
    await ready(page);
    expect((await log()).status).toBe('WAITING');
    await approve.click();
    const ran = lastAnswer(page).locator('pre[data-tool="note_write"][data-state="output-available"]');
    await ran.waitFor(TIMEOUT);
    await lastAnswer(page).locator('p', { hasText: 'Tool results:' }).waitFor(TIMEOUT);
    await ready(page);
    const afterApproval = (await log()).events.edges.map((e) => e.node);
    const decision = afterApproval.find((e) => e.type === 'tool/approval')!;
    expect(decision.data).toMatchObject({ decision: 'approved', by: 'local' });
    const result = afterApproval.find((e) => e.type === 'tool/result' && e.data.callId === decision.data.callId)!;
    expect(result.data.status).toBe('ok');
    expect(await ran.textContent()).toContain(`→ ${String(result.data.content)}`);
    expect(await lastAnswer(page).locator('p').last().textContent()).toContain(String(decision.data.callId));

    // Denied: the call never runs; its part shows the denial, and the model's answer follows.
    await send(page, '!call note_write {"key": "colour", "value": "red"}');
    const deny = page.getByRole('button', { name: 'Deny' });
    await deny.waitFor(TIMEOUT);
    await ready(page);
    await deny.click();
    const denied = lastAnswer(page).locator('pre[data-tool="note_write"][data-state="output-error"]');
    await denied.waitFor(TIMEOUT);
    expect(await denied.textContent()).toContain('was denied: denied in the page. It did not run.');
    await lastAnswer(page).locator('p', { hasText: 'Tool results:' }).waitFor(TIMEOUT);
    await ready(page);
    const after = await log();
    expect(after.status).toBe('IDLE');
    expect(after.events.edges.filter((e) => e.node.type === 'tool/approval').map((e) => e.node.data.decision)).toEqual(['approved', 'denied']);
    expect(await page.getByRole('button', { name: 'Approve' }).count()).toBe(0);
    expect(errors).toEqual([]);
  }, 120_000);
});

// ai 7's useChat reconnects (GET /chat/<id>/stream) when the page is visible again after the network cut its stream,
// and, the stream being a replay (DefaultChatTransport's resumeStreamIsReplay, its default), rebuilds the message
// from its start: forkline's resumed answer is a replay from the turn's start, so nothing shows twice.
describe('the useChat example on ai 7, its stream cut by the network', () => {
  it('reconnects once the page is visible again, and the answer ends once, whole', async () => {
    // A TCP door between the page and forkline whose connections can be cut (the server goes on with the turn).
    const sockets = new Set<net.Socket>();
    const door = net.createServer((client) => {
      const upstream = net.connect(port, '127.0.0.1');
      sockets.add(client).add(upstream);
      client.pipe(upstream).pipe(client);
      const drop = () => (client.destroy(), upstream.destroy());
      client.on('error', drop).on('close', drop);
      upstream.on('error', drop).on('close', drop);
    });
    await new Promise<void>((r) => door.listen(0, '127.0.0.1', () => r()));
    const doorPort = (door.address() as net.AddressInfo).port;
    try {
      const page = await browser.newPage();
      page.setDefaultTimeout(30_000);
      await page.goto(`${pageOrigin}/ai7/?chat=ai7-cut-chat&api=${encodeURIComponent(`http://127.0.0.1:${doorPort}/chat`)}`);
      const words = 'one two three four five six seven eight nine ten eleven twelve';
      await send(page, `${words}\n!slow 300`);
      await page.locator('article[data-role="assistant"]', { hasText: 'Echo: one' }).waitFor(TIMEOUT);
      for (const s of sockets) s.destroy();
      await page.locator('main[data-status="error"]').waitFor(TIMEOUT);
      expect((await lastAnswer(page).textContent())!.length).toBeLessThan(`Echo: ${words}`.length);
      await page.evaluate(() => document.dispatchEvent(new Event('visibilitychange')));
      await ready(page);
      expect(await lastAnswer(page).locator('p').allTextContents()).toEqual([`Echo: ${words}`]);
      expect((await turnCount((await lastAnswer(page).getAttribute('data-session'))!)).turnCount).toBe(1);
      expect(await page.getByRole('alert').count()).toBe(0);
    } finally {
      for (const s of sockets) s.destroy();
      door.close();
    }
  }, 120_000);
});
