// An agent that fails unexpectedly (here: the database refuses the result an
// MCP tool answered, through a trigger this test installs) closes its turn `failed` with the error, through the shared
// repair (docs/contract.md#repair); the session is idle, and the next message
// runs normally (docs/contract.md#agent-loop).
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { agentTurns } from '../helpers/agent-turns.ts';
import { anyData } from '../helpers/event-data.ts';

const REFUSED_SERVER = fileURLToPath(new URL('../fixtures/mcp/refused-result-server.mjs', import.meta.url));

let app: TestApp;
const logged: string[] = [];
beforeAll(async () => {
  app = await startTestApp({
    log: (m) => logged.push(m),
    mcp: { mcpServers: { refused: { command: process.execPath, args: [REFUSED_SERVER], env: {}, trusted: true, tools: {} } } },
  });
  // A fault of the database's own, not one the agent could foresee: the marked result's row is refused.
  await app.db.pool.query(`
    CREATE FUNCTION refuse_marked_result() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.type = 'tool/result' AND NOT NEW.synthetic AND NEW.data->>'content' LIKE '%REFUSE-THIS-RESULT%' THEN
        RAISE EXCEPTION 'the test refuses this row';
      END IF;
      RETURN NEW;
    END $$;
    CREATE TRIGGER refuse_marked_result BEFORE INSERT ON "Event" FOR EACH ROW EXECUTE FUNCTION refuse_marked_result();`);
});
afterAll(() => app?.close());

const SESSION = `query($id: ID!) { session(id: $id) { status pendingInputs { inputId } turns { turn reason error } } }`;

describe('an agent that fails unexpectedly', () => {
  it('ends its turn failed with the error, leaves the session idle, and runs the next message normally', async () => {
    const { create, turn, log } = agentTurns(() => app, 'agent-failure');
    const id = await create();
    await turn(id, '!call refused__deep {}');

    const after = (await app.ok(SESSION, { id })).session;
    expect(after.status).toBe('IDLE');
    expect(after.turns).toHaveLength(1);
    expect(after.turns[0].reason).toBe('failed');
    expect(after.turns[0].error).toMatch(/^the agent failed: \S/);
    expect(logged.join('\n')).toMatch(/agent of session .* failed/);

    // The open call got a synthetic result, its step and turn a synthetic end, with the error report (the shared repair's closers).
    const events = await log(id);
    const closers = events.filter((e) => e.synthetic).map((e) => [e.type, anyData(e).status ?? anyData(e).reason]);
    expect(closers).toEqual([
      ['tool/result', 'interrupted'],
      ['step/end', 'failed'],
      ['plugin/agent/error', undefined],
      ['turn/end', 'failed'],
    ]);
    const report = events.find((e) => e.type === 'plugin/agent/error');
    expect(anyData(report!).message).toBe(after.turns[0].error);

    await turn(id, 'hello again');
    const next = (await app.ok(SESSION, { id })).session;
    expect(next.status).toBe('IDLE');
    expect(next.pendingInputs).toEqual([]);
    expect(next.turns.map((t: { reason: string }) => t.reason)).toEqual(['failed', 'completed']);
  });
});
