// The 200,000-event trial (docs/operations.md#a-200000-event-trial): a user's
// import at a realistic size and its hostile variants, against `src/main.ts`
// as `npm start` runs it (its embedded Postgres), through `forkline import`
// in a terminal (script(1) gives it one) and Debian's Chromium. Prints the
// figures (import time, the service's peak RSS, long tasks) and what failed;
// exits 1 when something did. Not a test: a full run takes several minutes.
//
//   npx tsx scripts/big-import-trial.ts [--events 200000] [--keep]
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import { once } from 'node:events';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { chromium } from 'playwright-core';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const { values: args } = parseArgs({ options: { events: { type: 'string', default: '200000' }, keep: { type: 'boolean', default: false } } });
const EVENTS = Number(args.events);
const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-trial-'));
fs.chmodSync(dir, 0o755);
const dataDir = path.join(dir, 'data');
const failures: string[] = [];
const figures: Record<string, string | number> = {};
const check = (ok: boolean, what: string) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failures.push(what);
};

// ---- recordings, written as a stream (none is held whole) ----

type Line = Record<string, unknown>;
const header = (title: string) => ({ format: 'forkline.recording', version: 4, session: { id: 'ses_trial', title } });

/** Turns of 11 events: an input, a clock call and its result, an answer. */
function* turns(): Generator<Line> {
  let seq = 0;
  const e = (type: string, data: unknown): Line => ({ seq: seq++, type, data });
  for (let turn = 1; ; turn++) {
    const inputId = `in_${turn}`;
    yield e('inbox/add', { inputId, text: `question ${turn}: what time is it in zone ${turn % 24}?` });
    yield e('inbox/remove', { inputId, reason: 'taken' });
    yield e('turn/start', { turn, inputId });
    yield e('step/start', { turn, step: 1 });
    yield e('model/message', { turn, step: 1, text: 'Let me check the clock.', toolCalls: [{ id: `call_${turn}`, name: 'clock', arguments: '{}' }] });
    yield e('tool/result', { turn, step: 1, callId: `call_${turn}`, resultId: `res_${turn}`, status: 'ok', content: '2026-12-06T04:00:00Z', name: 'clock' });
    yield e('step/end', { turn, step: 1, reason: 'completed' });
    yield e('step/start', { turn, step: 2 });
    yield e('model/message', { turn, step: 2, text: `answer ${turn}: it is ${turn % 24}:00 there. ${'lorem ipsum '.repeat(8)}`, toolCalls: [] });
    yield e('step/end', { turn, step: 2, reason: 'completed' });
    yield e('turn/end', { turn, reason: 'completed' });
  }
}

/** One turn holding `events` events: steps of a call and its result. */
function* oneTurn(events: number): Generator<Line> {
  let seq = 0;
  const e = (type: string, data: unknown): Line => ({ seq: seq++, type, data });
  yield e('inbox/add', { inputId: 'in_1', text: 'count the clock ticks' });
  yield e('inbox/remove', { inputId: 'in_1', reason: 'taken' });
  yield e('turn/start', { turn: 1, inputId: 'in_1' });
  for (let step = 1; seq < events - 5; step++) {
    yield e('step/start', { turn: 1, step });
    yield e('model/message', { turn: 1, step, text: `tick ${step}`, toolCalls: [{ id: `call_${step}`, name: 'clock', arguments: '{}' }] });
    yield e('tool/result', { turn: 1, step, callId: `call_${step}`, resultId: `res_${step}`, status: 'ok', content: `t${step}`, name: 'clock' });
    yield e('step/end', { turn: 1, step, reason: 'completed' });
  }
  yield e('turn/end', { turn: 1, reason: 'completed' });
}

function* chain<T>(...parts: Iterable<T>[]): Generator<T> {
  for (const p of parts) yield* p;
}

async function writeLines(file: string, lines: Iterable<Line | string>) {
  const out = fs.createWriteStream(file);
  for (const l of lines) if (!out.write(`${typeof l === 'string' ? l : JSON.stringify(l)}\n`)) await once(out, 'drain');
  out.end();
  await once(out, 'finish');
  return fs.statSync(file).size;
}

function* take<T>(it: Iterable<T>, n: number, whole?: (t: T) => boolean): Generator<T> {
  let i = 0;
  for (const t of it) {
    yield t;
    if (++i >= n && (!whole || whole(t))) return;
  }
}
const turnEnd = (l: Line) => l.type === 'turn/end';

// ---- the service (src/main.ts, embedded Postgres) and its memory ----

interface Service {
  child: ChildProcess;
  url: string;
  log(): string;
}

async function startService(): Promise<Service> {
  const child = spawn(process.execPath, ['--import', `${ROOT}node_modules/tsx/dist/loader.mjs`, `${ROOT}src/main.ts`], {
    cwd: ROOT,
    env: { ...process.env, PORT: '0', FORKLINE_DATA_DIR: dataDir, FORKLINE_API_TOKENS: '' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c) => (out += c));
  child.stderr!.on('data', (c) => (out += c));
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`service did not start:\n${out}`)), 120_000);
    child.stdout!.on('data', () => {
      const m = /serving GraphQL and GraphiQL at (http:\/\/\S+)/.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.on('exit', (code) => reject(new Error(`service exited with ${code}:\n${out}`)));
  });
  return { child, url, log: () => out };
}

const rssMB = (pid: number) => Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1] ?? 0) / 1024;

/** The service's RSS sampled every 50 ms while `fn` runs: before and peak (MB). */
async function rssDuring<T>(pid: number, fn: () => Promise<T>) {
  const before = rssMB(pid);
  let peak = before;
  const timer = setInterval(() => {
    try {
      peak = Math.max(peak, rssMB(pid));
    } catch {
      // the process is gone (the kill -9 step)
    }
  }, 50);
  const t = performance.now();
  try {
    return { result: await fn(), before, peak, ms: performance.now() - t };
  } finally {
    clearInterval(timer);
  }
}

async function gql(s: Service, query: string, variables: Record<string, unknown> = {}) {
  const res = await fetch(s.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query, variables }) });
  // eslint-disable-next-line @typescript-eslint/no-explicit-any -- a trial's ad-hoc queries: their answers are read by name
  const body = (await res.json()) as { data?: any; errors?: Array<{ message: string }> };
  if (body.errors) throw new Error(body.errors.map((e) => e.message).join('; '));
  return body.data;
}

// ---- the CLI in a terminal ----

interface CliRun {
  code: number | null;
  /** What the terminal showed (stdout and stderr together, as script(1) records them). */
  screen: string;
  child: ChildProcess;
}

/** `forkline import <file>` in a pseudo-terminal (script -q -e -c), with FORKLINE_URL. */
function cliImport(s: Service, file: string, onScreen?: (screen: string) => void): { run: Promise<CliRun>; child: ChildProcess } {
  const command = `${process.execPath} ${ROOT}node_modules/tsx/dist/cli.mjs ${ROOT}client/cli.ts import ${file}`;
  const child = spawn('script', ['-q', '-e', '-f', '-c', command, '/dev/null'], {
    env: { ...process.env, FORKLINE_URL: s.url },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  let screen = '';
  child.stdout!.on('data', (c) => {
    screen += c;
    onScreen?.(screen);
  });
  child.stderr!.on('data', (c) => (screen += c));
  const run = new Promise<CliRun>((resolve) => child.on('close', (code) => resolve({ code, screen, child })));
  return { run, child };
}
/** The terminal's last visible line: what is left after the last carriage return or line feed. */
const lastLines = (screen: string, n = 2) =>
  screen
    .replaceAll('\x1b[K', '')
    .split(/\r?\n/)
    .map((l) => l.split('\r').filter(Boolean).at(-1) ?? '')
    .filter(Boolean)
    .slice(-n);

// ---- the dashboard in Chromium ----

async function dashboardTrial(s: Service, id: string, viewport: { width: number; height: number }, name: string) {
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium', args: ['--no-sandbox', '--disable-gpu'] });
  const tag = `${name} ${viewport.width}x${viewport.height}`;
  try {
    const page = await browser.newPage({ viewport });
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.addInitScript(() => {
      const w = window as unknown as { longTasks: number[] };
      w.longTasks = [];
      new PerformanceObserver((list) => list.getEntries().forEach((e) => w.longTasks.push(e.duration))).observe({ type: 'longtask', buffered: true });
    });
    const origin = s.url.replace(/\/graphql$/, '');
    const t = performance.now();
    await page.goto(`${origin}/sessions/${id}`);
    await page.locator('[data-testid="conversation-scroll"], [data-testid="timeline-scroll"]').first().waitFor({ timeout: 60_000 });
    figures[`${tag} open (ms)`] = Math.round(performance.now() - t);
    const longTasks = () => page.evaluate(() => (window as unknown as { longTasks: number[] }).longTasks.splice(0));
    await page.waitForTimeout(1000);
    figures[`${tag} long tasks while opening (ms)`] = JSON.stringify((await longTasks()).map(Math.round));
    const overflow = () => page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    check((await overflow()) <= 0, `${tag}: no horizontal overflow after opening`);

    // Both panes, to the top and the bottom, as a thumb dragged there, then a wheel scroll through part of it.
    for (const pane of ['conversation-scroll', 'timeline-scroll']) {
      const box = page.getByTestId(pane);
      if (!(await box.isVisible())) {
        // On a phone one pane shows at a time: its tab first.
        const tab = page.getByRole('tab', { name: pane.startsWith('timeline') ? /events|timeline/i : /conversation/i });
        if (await tab.count()) await tab.first().click();
      }
      if (!(await box.isVisible())) {
        figures[`${tag} ${pane}`] = 'not visible';
        continue;
      }
      for (const where of ['top', 'bottom', 'top', 'bottom'] as const) {
        await box.evaluate((el, w) => (el.scrollTop = w === 'top' ? 0 : el.scrollHeight), where);
        await page.waitForTimeout(800);
      }
      await box.hover();
      for (let i = 0; i < 60; i++) await page.mouse.wheel(0, -400);
      await page.waitForTimeout(500);
      const tasks = await longTasks();
      figures[`${tag} ${pane}: long tasks scrolling (ms)`] = JSON.stringify(tasks.map(Math.round));
      check(
        tasks.every((d) => d <= 200),
        `${tag}: ${pane} scrolled top/bottom with no long task > 200 ms`,
      );
      check((await overflow()) <= 0, `${tag}: ${pane} no horizontal overflow`);
    }

    // Search this session.
    const search = page.getByTestId('session-search-input');
    // On a phone the header is folded: the search is under Details.
    if (!(await search.isVisible())) await page.getByRole('button', { name: 'Details', exact: true }).click();
    if (await search.isVisible()) {
      const ts = performance.now();
      await search.fill(name === 'one long turn' ? 'tick 9000' : 'question 9000');
      await page.getByTestId('session-search-results').locator('button').first().waitFor({ timeout: 30_000 });
      figures[`${tag} search (ms)`] = Math.round(performance.now() - ts);
      figures[`${tag} long tasks searching (ms)`] = JSON.stringify((await longTasks()).map(Math.round));
    } else figures[`${tag} search`] = 'box not visible';
    await page.screenshot({ path: path.join(dir, `dashboard-${tag.replace(/\W+/g, '-')}.png`) });
    check(errors.length === 0, `${tag}: no page errors (${errors.join('; ').slice(0, 300)})`);
  } finally {
    await browser.close();
  }
}

// ---- the trial ----

async function main() {
  console.log(`trial in ${dir}: ${EVENTS.toLocaleString('en')} events`);
  const good = path.join(dir, 'good.jsonl');
  const goodBytes = await writeLines(good, chain([header('trial')], take(turns(), EVENTS, turnEnd)));
  const goodEvents = fs.readFileSync(good, 'utf8').split('\n').filter(Boolean).length - 1;
  figures['recording'] = `${goodEvents.toLocaleString('en')} events, ${(goodBytes / 2 ** 20).toFixed(1)} MB`;

  let s = await startService();
  const pid = s.child.pid!;
  figures['service RSS idle (MB)'] = Math.round(rssMB(pid));

  // 1. The import through the CLI in a terminal: progress shown, time, the service's peak RSS.
  const imported = await rssDuring(pid, () => cliImport(s, good).run);
  const screen = imported.result.screen;
  figures['import time (s)'] = (imported.ms / 1000).toFixed(1);
  figures['service peak RSS during import (MB)'] = `${Math.round(imported.peak)} (from ${Math.round(imported.before)})`;
  check(imported.result.code === 0, `CLI import exits 0 (${lastLines(screen).join(' | ')})`);
  const updates = screen.split('\r').filter((u) => /^importing /.test(u));
  figures['CLI progress redraws while the server imports'] = updates.length;
  check(updates.length >= 3, 'the CLI shows the server-side import progress in a terminal');
  const id = /imported (ses_\S+):/.exec(screen)?.[1] ?? /^(ses_\S+)/m.exec(screen)?.[1];
  check(id !== undefined, 'the CLI names the imported session');
  if (!id) throw new Error(screen.slice(-2000));
  const { session } = await gql(s, 'query($id: ID!) { session(id: $id) { eventCount turnCount } }', { id });
  check(session.eventCount === goodEvents, `imported ${session.eventCount} events`);

  // 2. Hostile variants: each refused with a line and a rule, memory and time bounded.
  const variants: Array<[string, string, RegExp]> = [];
  const badLast = path.join(dir, 'bad-last.jsonl');
  await writeLines(
    badLast,
    chain<Line | string>([header('bad last')], take(turns(), EVENTS - 1), [
      JSON.stringify({ seq: EVENTS - 1, type: 'turn/end', data: { turn: 999_999, reason: 'completed' } }),
    ]),
  );
  variants.push(['a bad last line', badLast, new RegExp(`line ${EVENTS + 1}: turn bracket`)]);
  const oneTurnFile = path.join(dir, 'one-turn.jsonl');
  await writeLines(oneTurnFile, chain([header('one turn')], oneTurn(EVENTS)));
  variants.push(['200k events in one turn (valid: imported)', oneTurnFile, /imported ses_/]);
  const longLine = path.join(dir, 'long-line.jsonl');
  {
    const out = fs.createWriteStream(longLine);
    out.write(`${JSON.stringify(header('long line'))}\n{"seq":0,"type":"inbox/add","data":{"inputId":"in_1","text":"`);
    const mb = Buffer.alloc(2 ** 20, 'a');
    for (let i = 0; i < 64; i++) if (!out.write(mb)) await once(out, 'drain');
    out.end('"}}\n');
    await once(out, 'finish');
  }
  variants.push(['one line of 64 MiB', longLine, /line 2: size: a line is longer than the limit/]);
  const dupCalls = path.join(dir, 'duplicate-call-ids.jsonl');
  await writeLines(dupCalls, chain([header('duplicate ids')], take(turns(), EVENTS - 10, turnEnd)));
  {
    // The last turn's message names one call id twice.
    const text = fs.readFileSync(dupCalls, 'utf8').trimEnd().split('\n');
    const n = text.length - 1;
    const turn = JSON.parse(text.at(-1)!).data.turn + 1;
    const more = [
      { seq: n, type: 'inbox/add', data: { inputId: `in_${turn}`, text: 'again' } },
      { seq: n + 1, type: 'inbox/remove', data: { inputId: `in_${turn}`, reason: 'taken' } },
      { seq: n + 2, type: 'turn/start', data: { turn, inputId: `in_${turn}` } },
      { seq: n + 3, type: 'step/start', data: { turn, step: 1 } },
      {
        seq: n + 4,
        type: 'model/message',
        data: {
          turn,
          step: 1,
          text: '',
          toolCalls: [
            { id: 'call_x', name: 'clock', arguments: '{}' },
            { id: 'call_x', name: 'clock', arguments: '{}' },
          ],
        },
      },
    ];
    fs.appendFileSync(dupCalls, more.map((l) => `${JSON.stringify(l)}\n`).join(''));
    variants.push(['a duplicate call id in the last line', dupCalls, new RegExp(`line ${n + 6}: call ids`)]);
  }
  const gz = path.join(dir, 'good.jsonl.gz');
  fs.writeFileSync(gz, zlib.gzipSync(fs.readFileSync(good)));
  variants.push(['a gzip file', gz, /line 1: encoding: .*gzip-compressed/]);
  const bomb = path.join(dir, 'bomb.jsonl.gz');
  fs.writeFileSync(bomb, zlib.gzipSync(Buffer.alloc(256 * 2 ** 20, 0x0a), { level: 9 }));
  variants.push(['a gzip bomb (256 MiB of newlines)', bomb, /line 1: encoding: .*gzip-compressed/]);

  const sessionsBefore = (await gql(s, '{ sessionCount }')).sessionCount;
  let expectedSessions = sessionsBefore;
  /** Sessions the variants imported (the one long turn): opened in the dashboard too. */
  const others: string[] = [];
  for (const [name, file, expected] of variants) {
    const r = await rssDuring(pid, () => cliImport(s, file).run);
    const said = lastLines(r.result.screen, 3).join(' | ');
    figures[`${name}: time (s), peak RSS (MB)`] = `${(r.ms / 1000).toFixed(1)}, ${Math.round(r.peak)} (from ${Math.round(r.before)})`;
    figures[`${name}: the CLI said`] = said.slice(0, 300);
    check(expected.test(r.result.screen), `${name}: ${expected}`);
    if (/imported/.test(expected.source)) {
      expectedSessions++;
      others.push(/imported (ses_\S+):/.exec(r.result.screen)?.[1] ?? '');
    }
  }
  check((await gql(s, '{ sessionCount }')).sessionCount === expectedSessions, 'refused recordings left no session');

  // 3. kill -9 during the import; then a restart: nothing half visible, no spool left; imported again; a clean restart.
  const spool = path.join(dataDir, 'uploads');
  let killedAt = '';
  const killing = cliImport(s, good, (screen) => {
    const m = /importing [^\r]*\((\d+)%\)/g;
    let last: RegExpExecArray | null = null;
    for (let x = m.exec(screen); x; x = m.exec(screen)) last = x;
    if (!killedAt && last && Number(last[1]) >= 40) {
      killedAt = last[0];
      process.kill(s.child.pid!, 'SIGKILL');
    }
  });
  const killed = await killing.run;
  figures['killed during the import at'] = killedAt || '(never: no progress seen)';
  figures['the CLI said when the server died'] = lastLines(killed.screen, 2).join(' | ').slice(0, 300);
  check(killedAt !== '', 'the service was killed halfway through an import');
  check(killed.code !== 0, 'the CLI fails when the server dies mid-import');
  s = await startService();
  check((await gql(s, '{ sessionCount }')).sessionCount === expectedSessions, 'after kill -9 and a restart: nothing of the killed import is visible');
  check(fs.readdirSync(spool).length === 0, 'after kill -9 and a restart: no spool file left');
  const again = await cliImport(s, good).run;
  check(again.code === 0, 'the same recording imports after the restart');
  s.child.kill('SIGTERM');
  await once(s.child, 'exit');
  s = await startService();
  const reopened = await gql(s, 'query($id: ID!) { session(id: $id) { eventCount status } }', { id });
  check(reopened.session.eventCount === goodEvents, `after a clean restart the session opens again (${JSON.stringify(reopened.session)})`);

  // 4. Fork in the middle of a turn (between a call and its result), continue, read it back.
  const mid = Math.floor(goodEvents / 2 / 11) * 11 + 4; // a model/message with a call
  const { forkSession } = await gql(
    s,
    'mutation($id: ID!, $at: Int!) { forkSession(input: { sessionId: $id, atSeq: $at, message: "and now?" }) { session { id eventCount } syntheticEvents { type } } }',
    { id, at: mid },
  );
  const child = forkSession.session.id;
  figures['fork at'] =
    `seq ${mid} (a call without its result): child ${child}, ${forkSession.session.eventCount} events, closers ${forkSession.syntheticEvents.map((e: { type: string }) => e.type).join(' ')}`;
  let answered = false;
  for (let i = 0; i < 120 && !answered; i++) {
    await new Promise((r) => setTimeout(r, 500));
    const { session: c } = await gql(s, 'query($id: ID!) { session(id: $id) { status lastAnswer { text } } }', { id: child });
    answered = c.status === 'IDLE' && /and now/.test(c.lastAnswer?.text ?? '');
  }
  check(answered, 'the fork in the middle of a turn continues and answers');

  // 5. The dashboard, phone and desktop.
  const opened: Array<[string, string, { width: number; height: number }]> = [
    ['imported', id, { width: 1440, height: 900 }],
    ['imported', id, { width: 390, height: 844 }],
    ['fork', child, { width: 1440, height: 900 }],
    ...others.filter(Boolean).map((o): [string, string, { width: number; height: number }] => ['one long turn', o, { width: 1440, height: 900 }]),
  ];
  for (const [name, session, viewport] of opened) {
    try {
      await dashboardTrial(s, session, viewport, name);
    } catch (err) {
      check(false, `dashboard ${name} ${viewport.width}x${viewport.height}: ${(err as Error).message.slice(0, 300)}`);
    }
  }
  s.child.kill('SIGTERM');
  await once(s.child, 'exit');
}

main()
  .catch((err: unknown) => {
    failures.push(String((err as Error).stack ?? err));
  })
  .finally(() => {
    console.log('\nfigures:');
    for (const [k, v] of Object.entries(figures)) console.log(`  ${k}: ${v}`);
    console.log(failures.length ? `\n${failures.length} failed:\n  ${failures.join('\n  ')}` : '\nall checks passed');
    if (args.keep) console.log(`kept ${dir}`);
    else fs.rmSync(dir, { recursive: true, force: true });
    process.exit(failures.length ? 1 : 0);
  });
