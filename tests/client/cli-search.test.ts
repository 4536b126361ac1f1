// `forkline search` against a real server: hits as lines (or JSON lines), the
// next page's command on stderr, and errors with their codes.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { runCli } from '../helpers/cli.ts';
import type { NewEvent } from '../../src/core/events.ts';

let app: TestApp;
let id: string;
let seqs: { input: number; message: number };

const cli = (args: string[]) => runCli(app.url, args);
const lines = (s: string) => s.trim().split('\n').filter(Boolean);

beforeAll(async () => {
  app = await startTestApp();
  id = (await app.ok(`mutation { createSession(input: { title: "Harbour logistics" }) { id } }`)).createSession.id;
  const events: NewEvent[] = [
    { type: 'inbox/add', data: { inputId: 'in_1', text: 'Which crane unloads the container ships?' } },
    { type: 'inbox/remove', data: { inputId: 'in_1', reason: 'taken' } },
    { type: 'turn/start', data: { turn: 1, inputId: 'in_1' } },
    { type: 'step/start', data: { turn: 1, step: 1 } },
    { type: 'model/message', data: { turn: 1, step: 1, text: 'The gantry crane on pier four unloads the container ships.', toolCalls: [] } },
    { type: 'step/end', data: { turn: 1, step: 1, reason: 'completed' } },
    { type: 'turn/end', data: { turn: 1, reason: 'completed' } },
  ];
  const written = await app.services.store.append(id, events);
  seqs = { input: written[0].seq, message: written[4].seq };
});
afterAll(() => app?.close());

describe('forkline search', () => {
  it('prints one line per hit, best first: session@seq, kind, title, snippet', async () => {
    const r = await cli(['search', 'gantry crane']);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(lines(r.stdout)).toEqual([`${id}@${seqs.message}  MESSAGE  Harbour logistics  The ⟦gantry⟧ ⟦crane⟧ on pier four unloads the container ships`]);
  });

  it('pages: --first, then the --after printed on stderr; --json prints hits with their cursors', async () => {
    const first = await cli(['search', 'container ships', '--first', '1', '--json']);
    expect(first.code).toBe(0);
    const [hit] = lines(first.stdout).map((l) => JSON.parse(l));
    // Written together (the same time): the later seq first.
    expect(hit).toMatchObject({ kind: 'MESSAGE', seq: seqs.message, session: { id }, descendants: 0 });
    const page = await cli(['search', 'container ships', '--first', '1']);
    const more = /more: forkline search "container ships" --after (\S+)/.exec(page.stderr);
    expect(more?.[1]).toBe(hit.cursor);
    const next = await cli(['search', 'container ships', '--first', '1', '--after', hit.cursor]);
    expect(lines(next.stdout)).toEqual([`${id}@${seqs.input}  INPUT    Harbour logistics  Which crane unloads the ⟦container⟧ ⟦ships⟧`]);
    expect(next.stderr).toBe('');
  });

  it('says when nothing matches; bad input is BAD_USER_INPUT (exit 1), a missing query a usage error (exit 2)', async () => {
    const none = await cli(['search', 'submarine']);
    expect(none.code).toBe(0);
    expect(none.stdout).toBe('');
    expect(none.stderr).toBe('no match\n');
    const empty = await cli(['search', ' ']);
    expect(empty.code).toBe(1);
    expect(empty.stderr).toMatch(/^forkline: BAD_USER_INPUT: query: must not be empty/);
    const usage = await cli(['search']);
    expect(usage.code).toBe(2);
    expect(usage.stderr).toContain('expected a query');
  });
});
