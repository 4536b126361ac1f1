import { describe, expect, it } from 'vitest';
import { RecentAppends } from '../../src/store/recent-appends.ts';
import type { StoredEvent } from '../../src/store/session-log.ts';

const ev = (seq: number): StoredEvent => ({
  seq,
  type: 'plugin/test/e',
  data: { seq },
  synthetic: false,
  createdAt: new Date(0),
  id: `e${seq}`,
  sessionId: 's',
  inherited: false,
});
const evs = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => ev(from + i));

describe('recent appends', () => {
  it('gives the events from a seq to the end of the last append, only to the lease they were appended under', () => {
    const r = new RecentAppends();
    r.record('s', evs(0, 0), 7, 10); // a message whose append claimed lease 7
    r.record('s', evs(1, 3), 7, 10); // the runner's appends under it
    expect(r.since('s', 0, { token: 7 })?.map((e) => e.seq)).toEqual([0, 1, 2, 3]);
    expect(r.since('s', 2, { token: 7 })?.map((e) => e.seq)).toEqual([2, 3]);
    expect(r.since('s', 4, { token: 7 })).toEqual([]); // at the end already
    expect(r.since('s', 5, { token: 7 })).toBeUndefined(); // past what it knows
    expect(r.since('s', 0, { token: 8 })).toBeUndefined(); // another lease: others may have written turns meanwhile
    expect(r.since('other', 0, { token: 7 })).toBeUndefined();
  });

  it('serves a lease a claim took when the log ended with these events, and no other', () => {
    const r = new RecentAppends();
    r.record('s', evs(0, 0), undefined, 10); // queued without claiming
    expect(r.since('s', 0, { token: 3 })).toBeUndefined();
    expect(r.since('s', 0, { token: 3, claimedAtEventCount: 2 })).toBeUndefined(); // the log had grown since
    expect(r.since('s', 0, { token: 3, claimedAtEventCount: 1 })?.map((e) => e.seq)).toEqual([0]);
  });

  it('starts again when another writer appended between, and drops what a transaction wrote', () => {
    const r = new RecentAppends();
    r.record('s', evs(0, 1), 1, 10);
    r.record('s', evs(5, 6), 1, 10); // seqs 2–4 were someone else's
    expect(r.since('s', 0, { token: 1 })).toBeUndefined();
    expect(r.since('s', 5, { token: 1 })?.map((e) => e.seq)).toEqual([5, 6]);
    r.forget('s');
    expect(r.since('s', 7, { token: 1 })).toBeUndefined();
  });

  it('keeps the newest events of a long run', () => {
    const r = new RecentAppends();
    for (let i = 0; i < 100; i++) r.record('s', [ev(i)], 1, 10);
    expect(r.since('s', 0, { token: 1 })).toBeUndefined();
    expect(r.since('s', 99, { token: 1 })?.map((e) => e.seq)).toEqual([99]);
  });
});
