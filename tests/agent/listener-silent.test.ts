// The LISTEN connection carries the lease heartbeat's renewals (store/leases.ts
// ReservedConnection) and every notification. When it goes silent without
// erroring (a half-open connection: a NAT or firewall dropped the flow, a
// partition without RST, a paused backend), a renewal on it never answers: it
// must not hold every later renewal back until this live process's leases lapse
// and another process takes its sessions over (docs/operations.md "The LISTEN
// connection"); and the listener is made again, so notifications arrive again,
// whether or not a renewal found it silent.
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { createTestDatabase } from '../helpers/db.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { waitFor } from '../helpers/wait.ts';
import { LeaseStore } from '../../src/store/leases.ts';
import { pgConfigFromUrl } from '../../src/db/pg-config.ts';
import { CONTROL_CHANNEL, encodeCancel } from '../../src/store/channels.ts';
import { SessionStore } from '../../src/store/session-store.ts';
import { toolEffectOf } from '../../src/agent/tools.ts';

// Long enough that a loaded host's pauses (a second or so) do not lapse it.
const TTL_MS = 2500;
let app: TestApp;
let proxy: TcpProxy;
/** Another process's connections. */
let other: pg.Pool;
/** Where the app keeps sessions' file workspaces. */
const workspaces = fs.mkdtempSync(path.join(os.tmpdir(), 'forkline-silent-workspaces-'));
const scope = { tenant: 'local' };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

beforeAll(async () => {
  const databaseUrl = await createTestDatabase();
  proxy = await startTcpProxy(databaseUrl);
  // Only the LISTEN connection goes through the proxy (it is made from the direct URL).
  app = await startTestApp({ databaseUrl, directUrl: proxy.url, leaseTtlMs: TTL_MS, workspacesDir: workspaces });
  other = new pg.Pool({ ...pgConfigFromUrl(databaseUrl), max: 2 });
});
afterAll(async () => {
  await other?.end();
  await app?.close();
  await proxy?.close();
  fs.rmSync(workspaces, { recursive: true, force: true });
});

async function inToolCall(ms: number): Promise<string> {
  const { id } = await app.services.store.createSession(scope, { title: 'silent listener' });
  await app.services.controller.sendMessage(scope, id, `!call sleep {"ms": ${ms}}`);
  await waitFor(async () => (await app.services.store.log.page(id, -1, 100)).some((e) => e.type === 'model/message'), { what: 'the tool call' });
  return id;
}

const turnEnds = async (id: string) =>
  (await app.services.store.log.page(id, -1, 100)).filter((e) => e.type === 'turn/end').map((e) => (e.data as { reason: string }).reason);

/** A cancel another process announces reaches `id`'s turn running here (this process's listener hears it). */
async function cancelArrives(id: string) {
  await waitFor(
    async () => {
      await other.query('SELECT pg_notify($1, $2)', [CONTROL_CHANNEL, encodeCancel(id)]);
      return (await turnEnds(id)).length === 1;
    },
    { what: 'the cancel to arrive', timeoutMs: 20_000, intervalMs: 500 },
  );
  expect(await turnEnds(id)).toEqual(['cancelled']);
}

describe('a LISTEN connection gone silent', () => {
  it('is made again while the process holds no lease (a probe finds it silent)', async () => {
    const before = proxy.connections;
    proxy.silenceOpen();
    await waitFor(() => proxy.connections > before, { what: 'the listener to connect again', timeoutMs: 40_000, intervalMs: 200 });
    await cancelArrives(await inToolCall(60_000));
  });

  it('costs the process none of its leases, and notifications arrive again', async () => {
    const id = await inToolCall(3 * TTL_MS + 3000);
    const before = proxy.connections;
    proxy.silenceOpen();
    // Another process tries to take the session over for three lease lifetimes.
    const rival = new LeaseStore(other, 'another-process', 60_000);
    let taken = false;
    for (const until = Date.now() + 3 * TTL_MS; !taken && Date.now() < until; await sleep(100)) taken = (await rival.claim(id)) !== null;
    expect(taken).toBe(false);
    await waitFor(async () => (await turnEnds(id)).length === 1, { what: 'the turn to end', timeoutMs: 20_000 });
    expect(await turnEnds(id)).toEqual(['completed']);

    // The listener was made again: a cancel another process announces reaches the turn running here.
    await waitFor(() => proxy.connections > before, { what: 'the listener to connect again' });
    await cancelArrives(await inToolCall(60_000));
  });

  it('loses no cancel: a turn another process cancels while the listener hears nothing ends cancelled here', async () => {
    const id = await inToolCall(60_000);
    proxy.silenceOpen();
    // What another process's cancelTurn does (SessionHost.cancel): keep the cancel on the row, then announce it, unheard here.
    expect(await new LeaseStore(other, 'another-process', 60_000).requestCancel(id)).toBe(1);
    await other.query('SELECT pg_notify($1, $2)', [CONTROL_CHANNEL, encodeCancel(id)]);
    await waitFor(async () => (await turnEnds(id)).length === 1, { what: 'the turn to end', timeoutMs: 20_000, intervalMs: 200 });
    expect(await turnEnds(id)).toEqual(['cancelled']);
    // The cancel named that turn only: the next one runs to its end.
    await app.services.controller.sendMessage(scope, id, '!call sleep {"ms": 10}');
    await waitFor(async () => (await turnEnds(id)).length === 2, { what: 'the next turn to end' });
    expect(await turnEnds(id)).toEqual(['cancelled', 'completed']);
  });

  it('loses no deletion: a session another process deleted meanwhile is deleted here once it is made again (its file workspace goes)', async () => {
    const { id } = await app.services.store.createSession(scope, { title: 'deleted while silent' });
    await app.services.controller.sendMessage(scope, id, '!call write_file {"path":"a.txt","content":"kept until deleted"}');
    await waitFor(async () => (await turnEnds(id)).length === 1, { what: 'the turn to end' });
    const dir = path.join(workspaces, id);
    expect(fs.existsSync(path.join(dir, 'a.txt'))).toBe(true);
    const before = proxy.connections;
    proxy.silenceOpen();
    // Deleted by another process: its notification goes to a listener that hears nothing.
    await new SessionStore(other, toolEffectOf).deleteSession(scope, id, { withDescendants: false });
    await waitFor(() => proxy.connections > before, { what: 'the listener to connect again', timeoutMs: 40_000, intervalMs: 200 });
    await waitFor(() => !fs.existsSync(dir), { what: "the deleted session's file workspace to go", timeoutMs: 10_000 });
  });
});
