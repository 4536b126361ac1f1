// A tool call's signal (session-runner.ts CallSignal): made when the tool first reads it, it aborts
// when the runner stops or when the call's time is up, counted from the call's start.
import { describe, expect, it } from 'vitest';
import { CallSignal } from '../../src/agent/session-runner.ts';

const wait = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('a tool call signal', () => {
  it('is timed from the start of the call, not from when the tool reads it', async () => {
    const call = new CallSignal(new AbortController().signal, 300);
    await wait(200);
    const signal = call.signal;
    expect(signal.aborted).toBe(false);
    const t = performance.now();
    await new Promise((r) => signal.addEventListener('abort', r, { once: true }));
    // About 100 ms after the read (300 from the start), never the full 300 after it.
    expect(performance.now() - t).toBeLessThan(290);
    expect((signal.reason as DOMException).name).toBe('TimeoutError');
    expect(call.timedOut()).toBe(true);
    call.done();
  });

  it('is aborted already when first read after the time is up, and counts as timed out unread', async () => {
    const call = new CallSignal(new AbortController().signal, 20);
    expect(call.timedOut()).toBe(false);
    await wait(40);
    expect(call.timedOut()).toBe(true); // a tool that never read it and failed late: "timed out"
    expect(call.signal.aborted).toBe(true);
    expect((call.signal.reason as DOMException).name).toBe('TimeoutError');
    call.done();
  });

  it("carries the runner's stop reason, before or after the read", async () => {
    const stop = new AbortController();
    const read = new CallSignal(stop.signal, 60_000);
    const signal = read.signal;
    stop.abort('cancel');
    expect(signal.aborted).toBe(true);
    expect(signal.reason).toBe('cancel');
    expect(read.timedOut()).toBe(false);
    const late = new CallSignal(stop.signal, 60_000);
    expect(late.signal.reason).toBe('cancel');
    read.done();
    late.done();
  });

  it('is left alone by a stop after the call ended', () => {
    const stop = new AbortController();
    const call = new CallSignal(stop.signal, 60_000);
    const signal = call.signal;
    call.done();
    stop.abort('shutdown');
    expect(signal.aborted).toBe(false);
  });
});
