// A tool call's signal (session-runner.ts CallSignal): made when the tool first reads it, it aborts
// when the runner stops or when the call's time is up, counted from the call's start. Its clock and timer
// are faked: a loaded machine's late timers cannot make a call look timed out early or late.
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { CallSignal } from '../../src/agent/session-runner.ts';

beforeEach(() => vi.useFakeTimers({ toFake: ['setTimeout', 'clearTimeout', 'performance'] }));
afterEach(() => vi.useRealTimers());

describe('a tool call signal', () => {
  it('is timed from the start of the call, not from when the tool reads it', () => {
    const call = new CallSignal(new AbortController().signal, 300);
    vi.advanceTimersByTime(200);
    const signal = call.signal;
    expect(signal.aborted).toBe(false);
    // 100 ms after the read (300 from the start), never the full 300 after it.
    vi.advanceTimersByTime(99);
    expect(signal.aborted).toBe(false);
    vi.advanceTimersByTime(1);
    expect(signal.aborted).toBe(true);
    expect((signal.reason as DOMException).name).toBe('TimeoutError');
    expect(call.timedOut()).toBe(true);
    call.done();
  });

  it('is aborted already when first read after the time is up, and counts as timed out unread', () => {
    const call = new CallSignal(new AbortController().signal, 20);
    vi.advanceTimersByTime(19);
    expect(call.timedOut()).toBe(false);
    vi.advanceTimersByTime(21);
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
