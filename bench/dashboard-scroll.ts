// The dashboard's scroll smoothness on a long session (issue 33, item 9):
// headless Chromium at 1440x900 opens a session of 1,000,000 events (20,000
// with BENCH_QUICK=1), written in bulk, and scrolls each pane for 120 frames
// (the timeline 400 px a frame through pages not loaded yet, the conversation
// 300 px a frame upwards, folding in earlier pages), three runs each. Figures:
// the p95 of the frame-to-frame time per run (16.7 ms = no frame dropped at
// 60 Hz) and the DOM size. Needs Debian's chromium (or CHROMIUM_PATH).
import type { BenchContext } from './context.ts';
import { percentile, QUICK, round } from './context.ts';
import { createLongSession } from './long-session.ts';
import { createApp } from '../src/app.ts';
import { launchChromium } from '../tests/browser/chromium.ts';
import { scrolledIntoView, scrollFrames } from '../tests/browser/frames.ts';

const RUNS = 3;

export async function benchDashboardScroll(ctx: BenchContext): Promise<Record<string, unknown>> {
  const events = QUICK ? 20_000 : 1_000_000;
  const session = await createLongSession(ctx, events, { title: `dashboard scroll ${events}` });
  const app = await createApp({ databaseUrl: ctx.databaseUrl, log: () => {} });
  const browser = await launchChromium();
  try {
    const page = await browser.newPage({ viewport: { width: 1440, height: 900 } });
    // tsx keeps function names with a __name helper that the page lacks (vitest does not add it).
    await page.addInitScript({ content: 'globalThis.__name = (f) => f;' });
    const p95 = (xs: number[]) => round(percentile([...xs].sort((a, b) => a - b), 95), 1);
    const timeline: number[] = [];
    const conversation: number[] = [];
    for (let run = 0; run < RUNS; run++) {
      await page.goto(`${new URL(app.url).origin}/sessions/${session.id}`);
      await scrolledIntoView(page, 'timeline-scroll', `table.timeline tr[data-seq="${events - 1}"]`);
      await scrolledIntoView(page, 'conversation-scroll', `.conversation > li.turn-end[data-turn="${session.turns}"]`);
      timeline.push(p95(await scrollFrames(page, 'timeline-scroll', -400, 120)));
      conversation.push(p95(await scrollFrames(page, 'conversation-scroll', -300, 120)));
    }
    const domElements = await page.evaluate(() => document.getElementsByTagName('*').length);
    return {
      events,
      'timeline scroll p95 per run (ms)': timeline.join(' / '),
      'conversation scroll p95 per run (ms)': conversation.join(' / '),
      'DOM elements': domElements,
    };
  } finally {
    await browser.close();
    await app.close();
  }
}
