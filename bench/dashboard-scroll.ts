// The dashboard's scroll smoothness on long sessions:
// headless Chromium at 1440x900 opens sessions of 20,000 and 1,000,000 events
// (20,000 only with BENCH_QUICK=1; BENCH_SCROLL_EVENTS=a,b for other sizes),
// written in bulk, and scrolls each pane for 120 frames (the timeline 400 px a
// frame through pages not loaded yet, the conversation 300 px a frame upwards,
// folding in earlier pages), three runs each (BENCH_SCROLL_RUNS). Figures: the
// p95 of the frame-to-frame time per run, p95/p99 over all runs' frames (16.7
// ms = no frame dropped at 60 Hz), the browser's CPU time per frame, and the
// DOM size. The sessions list beside the panes holds 5,000 sessions
// (BENCH_SCROLL_SESSIONS; written in bulk, each with a model), as a user with a
// long history has.
// Needs Debian's chromium (or CHROMIUM_PATH).
//
// BENCH_SCROLL_BASELINE=<dir>: a dashboard build of other code (a copy of
// client/dashboard/dist) measured in the same runs, alternating with this one
// (the page's files served from there; /graphql from the same server), so both
// see the same machine load.
// BENCH_SCROLL_TRACE=<dir>: one more run per build and pane under a Chromium
// performance trace (written there), and where the main thread's time went
// per frame: scripting, style, layout, paint, other (tracing slows the page,
// so those runs are not in the frame figures).
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import type { BenchContext } from './context.ts';
import { percentile, QUICK, round } from './context.ts';
import { createLongSession } from './long-session.ts';
import { createApp } from '../src/app.ts';
import { launchChromium } from '../tests/browser/chromium.ts';
import { scrolledIntoView, scrollFrames } from '../tests/browser/frames.ts';
import { OTHER_BUILD_ARGS, serveOtherBuild } from '../tests/browser/other-build.ts';

const RUNS = Number(process.env.BENCH_SCROLL_RUNS ?? 3);
const SIZES = (process.env.BENCH_SCROLL_EVENTS ?? (QUICK ? '20000' : '20000,1000000')).split(',').map(Number);
const BASELINE = process.env.BENCH_SCROLL_BASELINE;
const TRACE = process.env.BENCH_SCROLL_TRACE;
const FRAMES = 120;
/** Sessions in the list while the panes scroll (the long sessions among them). */
const LISTED = Number(process.env.BENCH_SCROLL_SESSIONS ?? 5000);

type Pane = 'timeline' | 'conversation';
const PANES: Record<Pane, { testId: string; by: number }> = {
  timeline: { testId: 'timeline-scroll', by: -400 },
  conversation: { testId: 'conversation-scroll', by: -300 },
};

export async function benchDashboardScroll(ctx: BenchContext): Promise<Record<string, unknown>> {
  const app = await createApp({ databaseUrl: ctx.databaseUrl, log: () => {} });
  const origin = new URL(app.url).origin;
  const browser = await launchChromium(BASELINE ? OTHER_BUILD_ARGS : []);
  const figures: Record<string, unknown> = {};
  try {
    const t = performance.now();
    await listedSessions(ctx, LISTED);
    const inList = (await ctx.db.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM "Session" WHERE tenant = 'local'`)).rows[0].n;
    figures['sessions in the list'] = inList;
    figures['writing them (ms)'] = round(performance.now() - t);
    const builds: Array<{ name: string; context: BrowserContext }> = [{ name: 'this build', context: await newContext(browser) }];
    if (BASELINE) builds.push({ name: 'baseline', context: await newContext(browser, path.resolve(BASELINE)) });
    for (const events of SIZES) {
      const session = await longSession(ctx, events);
      const open = async (page: Page, build: string) => {
        await page.goto(`${origin}/sessions/${session.id}`);
        // The list holds them all (virtualised) while the panes scroll.
        await page.waitForFunction((n) => Number(document.querySelector('ul.tree-rows')?.getAttribute('data-count')) >= n, LISTED, { timeout: 60_000 });
        const landed = async (pane: Pane, selector: string) => {
          try {
            await scrolledIntoView(page, PANES[pane].testId, selector);
          } catch (err) {
            // Which build and pane did not open at the end, and how the page looked then.
            const shot = path.join(os.tmpdir(), `dashboard-scroll-${events}-${build.replace(/\W/g, '-')}-${pane}.png`);
            await page.screenshot({ path: shot }).catch(() => {});
            throw new Error(`${build}, ${events.toLocaleString('en-US')} events: the ${pane} did not open at its end (${shot})`, { cause: err });
          }
        };
        await landed('timeline', `table.timeline tr[data-seq="${events - 1}"]`);
        await landed('conversation', `.conversation > li.turn-end[data-turn="${session.turns}"]`);
      };
      const frames = new Map<string, { perRun: number[]; all: number[]; cpu: number[] }>();
      let dom = 0;
      for (let run = 0; run < RUNS; run++) {
        // Alternating which build goes first: neither always scrolls a warmer machine.
        for (const build of run % 2 ? [...builds].reverse() : builds) {
          const page = await build.context.newPage();
          await open(page, build.name);
          for (const pane of Object.keys(PANES) as Pane[]) {
            const cpu = browserCpuMs();
            const deltas = await scrollFrames(page, PANES[pane].testId, PANES[pane].by, FRAMES);
            const f = frames.get(`${build.name} ${pane}`) ?? { perRun: [], all: [], cpu: [] };
            f.perRun.push(p(deltas, 95));
            f.all.push(...deltas);
            f.cpu.push(round((browserCpuMs() - cpu) / FRAMES, 1));
            frames.set(`${build.name} ${pane}`, f);
          }
          if (build.name === 'this build') dom = await page.evaluate(() => document.getElementsByTagName('*').length);
          await page.close();
        }
      }
      const size = events.toLocaleString('en-US');
      for (const [key, f] of frames) {
        figures[`${size}: ${key} p95 (ms; goal ≤ 17)`] = p(f.all, 95);
        figures[`${size}: ${key} p95 per run (ms)`] = f.perRun.join(' / ');
        figures[`${size}: ${key} p95 / p99 all runs (ms)`] = `${p(f.all, 95)} / ${p(f.all, 99)}`;
        figures[`${size}: ${key} browser CPU per frame per run (ms)`] = f.cpu.join(' / ');
      }
      figures[`${size}: DOM elements`] = dom;
      if (TRACE) {
        for (const build of builds) {
          for (const pane of Object.keys(PANES) as Pane[]) {
            const page = await build.context.newPage();
            await open(page, build.name);
            const file = path.join(TRACE, `scroll-${events}-${pane}-${build.name.replace(/\W/g, '-')}.json`);
            fs.mkdirSync(TRACE, { recursive: true });
            await browser.startTracing(page, { path: file, categories: ['devtools.timeline', 'disabled-by-default-devtools.timeline', 'v8.execute'] });
            await scrollFrames(page, PANES[pane].testId, PANES[pane].by, FRAMES);
            await browser.stopTracing();
            await page.close();
            figures[`${size}: ${build.name} ${pane} main thread per frame (ms, traced)`] = mainThreadBreakdown(file, FRAMES);
          }
        }
      }
    }
    return figures;
  } finally {
    await browser.close();
    await app.close();
  }
}

/**
 * `count` sessions for the list (each with its title event and a model),
 * written in bulk in one statement; those an earlier run left on
 * BENCH_DATABASE_URL are kept.
 */
async function listedSessions(ctx: BenchContext, count: number) {
  await ctx.db.pool.query(
    `WITH s AS (
       INSERT INTO "Session" (id, "treeId", tenant, title, "eventCount", "modelProvider", "modelName", "createdAt", "updatedAt")
       SELECT 'ses_scroll_' || lpad(i::text, 6, '0'), 'ses_scroll_' || lpad(i::text, 6, '0'), 'local', 'listed session ' || i, 1,
              'scripted', (ARRAY['gpt-5', 'claude-sonnet-4', 'gemini-2.5-pro'])[i % 3 + 1],
              now() - ((3 * $1 - i) || ' seconds')::interval, now() - ((3 * $1 - i) || ' seconds')::interval
         FROM generate_series(1, $1) AS i
       ON CONFLICT DO NOTHING
       RETURNING id, title
     ), t AS (INSERT INTO "SessionTree" (id, "treeId") SELECT id, id FROM s)
     INSERT INTO "Event" ("sessionId", seq, "treeId", type, data, synthetic, "pendingInputCount")
     SELECT id, 0, id, 'session/title', jsonb_build_object('title', title), false, 0 FROM s`,
    [count],
  );
}

/** A session of `events` events: one an earlier run left on BENCH_DATABASE_URL, else a new one. */
async function longSession(ctx: BenchContext, events: number): Promise<{ id: string; turns: number }> {
  const title = `dashboard scroll ${events}`;
  const { rows } = await ctx.db.pool.query<{ id: string; turnCount: number }>(
    `SELECT id, "turnCount" FROM "Session" WHERE title = $1 AND "eventCount" = $2 LIMIT 1`,
    [title, events],
  );
  if (rows[0]) return { id: rows[0].id, turns: rows[0].turnCount };
  return createLongSession(ctx, events, { title });
}

/**
 * CPU time (user + system) of the browser's processes so far: this process's
 * descendants (Chromium's browser, GPU and renderer processes). Unlike frame
 * times it hardly moves with the machine's other load, so it shows a change in
 * the work a scroll costs where the p95 cannot.
 */
function browserCpuMs(): number {
  if (!fs.existsSync('/proc')) return NaN; // Linux only
  const stats = new Map<number, { ppid: number; ticks: number; chromium: boolean }>();
  for (const dir of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(dir)) continue;
    try {
      // The fields after the command name (which may hold spaces): state ppid … utime(14) stime(15).
      const stat = fs.readFileSync(`/proc/${dir}/stat`, 'utf8');
      const fields = stat.replace(/^.*\) /, '').split(' ');
      const chromium = /\((chromium|chrome)/.test(stat); // not the embedded Postgres, also a descendant
      stats.set(Number(dir), { ppid: Number(fields[1]), ticks: Number(fields[11]) + Number(fields[12]), chromium });
    } catch {
      // gone meanwhile
    }
  }
  const mine = new Set([process.pid]);
  let ticks = 0;
  for (let grew = true; grew;) {
    grew = false;
    for (const [pid, s] of stats) {
      if (!mine.has(pid) && mine.has(s.ppid)) {
        mine.add(pid);
        if (s.chromium) ticks += s.ticks;
        grew = true;
      }
    }
  }
  return (ticks * 1000) / CLOCK_TICKS;
}
/** USER_HZ: /proc's unit of CPU time (100 on Linux). */
const CLOCK_TICKS = 100;

const p = (xs: number[], q: number) =>
  round(
    percentile(
      [...xs].sort((a, b) => a - b),
      q,
    ),
    1,
  );

async function newContext(browser: Browser, distDir?: string): Promise<BrowserContext> {
  const context = await browser.newContext({ viewport: { width: 1440, height: 900 } });
  // tsx keeps function names with a __name helper that the page lacks (vitest does not add it).
  await context.addInitScript({ content: 'globalThis.__name = (f) => f;' });
  if (distDir) await serveOtherBuild(context, distDir);
  return context;
}

// Trace event names by the kind of work (Chrome DevTools' grouping); others count as "other".
const KINDS: Array<[kind: string, names: RegExp]> = [
  [
    'scripting',
    /^(FunctionCall|EvaluateScript|v8\.|V8\.|RunMicrotasks|FireAnimationFrame|EventDispatch|TimerFire|MinorGC|MajorGC|BlinkGC|GCEvent|XHR|ResourceReceive|ParseHTML|HandlePostMessage)/,
  ],
  ['style', /^(UpdateLayoutTree|RecalculateStyles|ParseAuthorStyleSheet|ScheduleStyleRecalculation|InvalidateLayout)$/],
  ['layout', /^(Layout|UpdateLayout|ComputeIntersections|IntersectionObserver|ResizeObserver|LayoutShift|ScrollLayer|UpdateScrollOffset)/],
  ['paint', /^(Paint|PrePaint|PaintImage|Layerize|UpdateLayer|UpdateLayerTree|CompositeLayers|Commit|PaintSetup|Decode|Rasterize|RasterTask)/],
];

/** The renderer main thread's self time per kind of work, per frame, from a Chromium trace. */
function mainThreadBreakdown(file: string, frames: number): string {
  const trace = JSON.parse(fs.readFileSync(file, 'utf8')) as { traceEvents: TraceEvent[] } | TraceEvent[];
  const all = Array.isArray(trace) ? trace : trace.traceEvents;
  const mains = new Set(all.filter((e) => e.ph === 'M' && e.name === 'thread_name' && e.args?.name === 'CrRendererMain').map((e) => `${e.pid}:${e.tid}`));
  // The busiest renderer main thread is the page's.
  const byThread = new Map<string, TraceEvent[]>();
  for (const e of all) {
    const key = `${e.pid}:${e.tid}`;
    if (mains.has(key) && e.ph === 'X' && e.dur !== undefined) (byThread.get(key) ?? byThread.set(key, []).get(key)!).push(e);
  }
  const events = [...byThread.values()].sort((a, b) => b.length - a.length)[0] ?? [];
  events.sort((a, b) => a.ts - b.ts || b.dur! - a.dur!);
  // Self time: an event's duration less its children's.
  const self = new Map<string, number>();
  const stack: Array<{ end: number; name: string }> = [];
  for (const e of events) {
    while (stack.length && stack.at(-1)!.end <= e.ts) stack.pop();
    const parent = stack.at(-1);
    const end = e.ts + e.dur!;
    if (parent) self.set(parent.name, (self.get(parent.name) ?? 0) - (Math.min(end, parent.end) - e.ts));
    self.set(e.name, (self.get(e.name) ?? 0) + e.dur!);
    stack.push({ end, name: e.name });
  }
  const kinds = new Map<string, number>();
  for (const [name, us] of self) {
    const kind = KINDS.find(([, re]) => re.test(name))?.[0] ?? 'other';
    kinds.set(kind, (kinds.get(kind) ?? 0) + us);
  }
  const perFrame = (us: number) => round(us / 1000 / frames, 2);
  const top = [...self]
    .sort((a, b) => b[1] - a[1])
    .slice(0, 6)
    .map(([n, us]) => `${n} ${perFrame(us)}`);
  return `${[...kinds].map(([k, us]) => `${k} ${perFrame(us)}`).join(', ')} (top: ${top.join(', ')})`;
}

interface TraceEvent {
  name: string;
  ph: string;
  pid: number;
  tid: number;
  ts: number;
  dur?: number;
  args?: { name?: string };
}
