// A clock that moves only when the test moves it (src/core/clock.ts): pass it to
// startTestApp({ clock }) and `advance` past a turn limit, a heartbeat or a
// silence instead of waiting for it in real time.
import type { Clock, ClockTimer } from '../../src/core/clock.ts';

interface Scheduled {
  at: number;
  fn: () => void;
  every?: number;
}

class FakeTimer implements ClockTimer {
  constructor(readonly id: number) {}
  unref() {
    return this;
  }
}

/** Lets what the callbacks started run on (promise chains, I/O callbacks already due). */
const settle = () => new Promise<void>((r) => setImmediate(r));

export class FakeClock implements Clock {
  private time: number;
  private nextId = 1;
  private readonly scheduled = new Map<number, Scheduled>();

  /** Starts at the real time, so what the database stamps and what this clock reads stay close. */
  constructor(start = Date.now()) {
    this.time = start;
  }

  now(): number {
    return this.time;
  }

  setTimeout(fn: () => void, ms: number): ClockTimer {
    const id = this.nextId++;
    this.scheduled.set(id, { at: this.time + Math.max(0, ms), fn });
    return new FakeTimer(id);
  }

  setInterval(fn: () => void, ms: number): ClockTimer {
    const id = this.nextId++;
    const every = Math.max(1, ms);
    this.scheduled.set(id, { at: this.time + every, fn, every });
    return new FakeTimer(id);
  }

  clearTimeout(timer: ClockTimer | undefined): void {
    if (timer instanceof FakeTimer) this.scheduled.delete(timer.id);
  }

  clearInterval(timer: ClockTimer | undefined): void {
    this.clearTimeout(timer);
  }

  /**
   * Moves time forward by `ms`, running every timer that falls due, in order,
   * letting each one's work start before the next. Advance in steps to see an
   * interval run more than once.
   */
  async advance(ms: number): Promise<void> {
    const end = this.time + ms;
    for (;;) {
      let next: [number, Scheduled] | undefined;
      for (const entry of this.scheduled) if (entry[1].at <= end && (!next || entry[1].at < next[1].at)) next = entry;
      if (!next) break;
      const [id, s] = next;
      // An interval due several times within one advance runs once, at the last of them, as a real one behind a busy event loop does.
      if (s.every) s.at += s.every * Math.floor((end - s.at) / s.every);
      this.time = Math.max(this.time, s.at);
      if (s.every) s.at += s.every;
      else this.scheduled.delete(id);
      s.fn();
      await settle();
    }
    this.time = Math.max(this.time, end); // advances may overlap (a test's jump and a pump's ticks)
    await settle();
  }
}
