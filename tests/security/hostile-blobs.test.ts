// File contents belong to tenants (docs/files.md, docs/operations.md "Threat
// model"): a change set names only content it carries or its own tenant
// holds; "another tenant's" and "nobody's" are one answer at every door (no
// oracle); a request names at most so many hashes; sizes are the stored ones;
// deleting a tenant's last session holding a content ends its claim, and the
// content another tenant holds stays theirs.
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.ts';
import { A, B, startTwoTenantApp } from '../helpers/two-tenants.ts';
import { reclaimed } from '../helpers/reclaimed.ts';
import { appendEvents, calledRunnerSession, importRecording, postRecording, recordingOf, runnerFileBatch, sessionCount, sha256 } from './hostile-doors.ts';

const MAX_NAMED = 50;

let app: TestApp;
const secret = '4821';
const secretHash = sha256(secret);
const nobodysHash = sha256('held by nobody at all');
let sessionA: string;

const gqlAs = (who: Record<string, string>) => (query: string, variables?: Record<string, unknown>) => app.gql(query, variables, who);
/** An answer with the hashes it names taken out: what a caller learns of them. */
const withoutHashes = (message: string) => message.replace(/[0-9a-f]{64}/g, '<hash>');

beforeAll(async () => {
  app = await startTwoTenantApp({
    maxNamedFileHashes: MAX_NAMED,
  });
  // Tenant A keeps a 4-digit PIN in a file, written by its agent.
  const created = await gqlAs(A)(`mutation { createSession(input: { title: "A's secret" }) { id } }`);
  sessionA = created.data.createSession.id;
  await gqlAs(A)(`mutation($id: ID!, $t: String!) { sendMessage(input: { sessionId: $id, text: $t }) { inputId } }`, {
    id: sessionA,
    t: `!call write_file ${JSON.stringify({ path: 'pin.txt', content: secret })}`,
  });
  await app.services.host.idle();
  const file = await gqlAs(A)(`query($id: ID!) { session(id: $id) { file(path: "pin.txt") { hash text } } }`, { id: sessionA });
  expect(file.data.session.file).toEqual({ hash: secretHash, text: secret });
});
afterAll(() => app?.close());

describe('naming content without carrying it', () => {
  it("tenant B's recording naming A's content is refused exactly as one naming content nobody holds (POST /recordings and importRecording)", async () => {
    const before = await sessionCount(app);
    const answers: string[] = [];
    for (const hash of [secretHash, nobodysHash]) {
      const posted = await postRecording(app, recordingOf([{ path: 'pin.txt', hash, size: secret.length }]), B);
      expect(posted.status).toBe(400);
      expect(posted.body.errors[0].extensions.code).toBe('BAD_USER_INPUT');
      const imported = await importRecording(app, recordingOf([{ path: 'pin.txt', hash, size: secret.length }]), B);
      expect(imported.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
      expect(imported.errors![0].message).toBe(posted.body.errors[0].message);
      answers.push(withoutHashes(imported.errors![0].message));
    }
    expect(answers[0]).toContain('which it does not carry and this tenant does not hold');
    expect(answers[0]).toContain('line 7');
    expect(answers[0]).toBe(answers[1]);
    expect(await sessionCount(app)).toBe(before);
  });

  it("tenant B's runner batch naming A's content is refused exactly as one naming content nobody holds; nothing is appended", async () => {
    const answers: string[] = [];
    for (const hash of [secretHash, nobodysHash]) {
      const s = await calledRunnerSession(app, B);
      const r = await appendEvents(app, s, runnerFileBatch([{ path: 'pin.txt', hash, size: secret.length }]), B);
      expect(r.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
      answers.push(withoutHashes(r.errors![0].message));
      const after = await gqlAs(B)(`query($id: ID!) { session(id: $id) { eventCount file(path: "pin.txt") { text } } }`, { id: s.id });
      expect(after.data.session).toEqual({ eventCount: s.eventCount, file: null });
    }
    expect(answers[0]).toBe(answers[1]);
  });

  it('the brute force of the report (one batch naming many hashes) is capped, and names the limit', async () => {
    const s = await calledRunnerSession(app, B);
    const changes = Array.from({ length: MAX_NAMED + 1 }, (_, i) => ({ path: `p${i}.txt`, hash: sha256(String(i).padStart(4, '0')), size: 4 }));
    const r = await appendEvents(app, s, runnerFileBatch(changes), B);
    expect(r.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(r.errors![0].message).toContain(`at most ${MAX_NAMED} distinct file contents per request without carrying them (FORKLINE_MAX_NAMED_FILE_HASHES)`);
    const imported = await importRecording(app, recordingOf(changes), B);
    expect(imported.errors![0].message).toContain('FORKLINE_MAX_NAMED_FILE_HASHES');
    // What a recording carries is not counted: it proves it has the content.
    const contents = changes.map((_, i) => Buffer.from(String(i).padStart(4, '0')));
    const carrying = await importRecording(app, recordingOf(changes, contents), B);
    expect(carrying.errors).toBeUndefined();
  });

  it("the tenant's own content may be named (a runner of A reusing A's file), with its stored size only", async () => {
    const s = await calledRunnerSession(app, A);
    const lying = await appendEvents(app, s, runnerFileBatch([{ path: 'copy.txt', hash: secretHash, size: 1 }]), A);
    expect(lying.errors?.[0].extensions?.code).toBe('BAD_USER_INPUT');
    expect(lying.errors![0].message).toContain(`says "copy.txt" has 1 bytes, but its content has ${secret.length}`);
    const ok = await appendEvents(app, s, runnerFileBatch([{ path: 'copy.txt', hash: secretHash, size: secret.length }]), A);
    expect(ok.errors).toBeUndefined();
    const file = await gqlAs(A)(`query($id: ID!) { session(id: $id) { file(path: "copy.txt") { text } } }`, { id: s.id });
    expect(file.data.session.file.text).toBe(secret);
  });

  it("a change set must sit right before its call's result in the same batch", async () => {
    const s = await calledRunnerSession(app, A);
    const batch = runnerFileBatch([{ path: 'x.txt', hash: secretHash, size: secret.length }]);
    const r = await appendEvents(app, s, batch.slice(0, 1), A);
    expect(r.errors?.[0].message).toContain("a change set comes right before its call's tool/result, in the same batch");
  });
});

describe('what naming a content costs', () => {
  /** Rows each scan of the plan read (kept or filtered out), summed: the work a lookup did, whatever the machine's speed. */
  const rowsRead = (node: Record<string, unknown>): number =>
    ((Number(node['Actual Rows'] ?? 0) + Number(node['Rows Removed by Filter'] ?? 0) + Number(node['Rows Removed by Index Recheck'] ?? 0)) *
      Number(node['Actual Loops'] ?? 1) || 0) + ((node.Plans as Array<Record<string, unknown>> | undefined) ?? []).reduce((n, p) => n + rowsRead(p), 0);

  it("does not depend on how many sessions of another tenant hold it: B's lookup of A's content held by 300 sessions reads what one of content nobody holds reads (before: 901 rows against 0)", async () => {
    const store = app.services.store;
    const popular = randomBytes(64);
    const popularHash = sha256(popular);
    for (let i = 0; i < 300; i++) {
      const s = (await store.createSession({ tenant: 'alpha' }, { title: 'holds it' })).id;
      await store.files.put(s, [{ hash: popularHash, content: popular }]);
      const own = randomBytes(64);
      const b = (await store.createSession({ tenant: 'beta' }, { title: 'its own' })).id;
      await store.files.put(b, [{ hash: sha256(own), content: own }]);
    }
    const explain = new pg.Pool({ connectionString: app.db.url, max: 1 });
    try {
      // The planner's statistics as a database that has run a while keeps them.
      await explain.query('ANALYZE "Session", "SessionBlob", "FileBlob"');
      const work = async (hash: string) => {
        let statement: { sql: string; params: unknown[] } | undefined;
        const held = await store.files.heldBy('beta', [hash], {
          query: ((sql: string, params: unknown[]) => ((statement = { sql, params }), explain.query(sql, params))) as never,
        });
        expect(held.size).toBe(0);
        const { rows } = await explain.query(`EXPLAIN (ANALYZE, FORMAT JSON) ${statement!.sql}`, statement!.params);
        return rowsRead((rows[0]['QUERY PLAN'] as Array<{ Plan: Record<string, unknown> }>)[0].Plan);
      };
      expect(await work(popularHash)).toBe(await work(nobodysHash));
      // And A's own lookup still finds it.
      expect((await store.files.heldBy('alpha', [popularHash])).get(popularHash)).toBe(popular.byteLength);
    } finally {
      await explain.end();
    }
  });
});

describe("deleting the last of a tenant's references", () => {
  it("ends that tenant's claim; the same content carried by another tenant stays theirs", async () => {
    const content = 'shared by accident';
    const hash = sha256(content);
    // Tenant A holds it through one session (imported, carrying it); tenant B carries it too.
    const a1 = await importRecording(app, recordingOf([{ path: 'k.txt', hash, size: content.length }], [Buffer.from(content)]), A);
    const b1 = await importRecording(app, recordingOf([{ path: 'k.txt', hash, size: content.length }], [Buffer.from(content)]), B);
    const a1Id = a1.data.importRecording.id;
    const b1Id = b1.data.importRecording.id;
    // While A holds it, A may name it without carrying it.
    const a2 = await importRecording(app, recordingOf([{ path: 'again.txt', hash, size: content.length }]), A);
    expect(a2.errors).toBeUndefined();

    await gqlAs(A)(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: a1Id });
    await gqlAs(A)(`mutation($id: ID!) { deleteSession(id: $id) { deletedSessionIds } }`, { id: a2.data.importRecording.id });
    await reclaimed(app);
    // A holds it no more: naming it is refused as for content nobody holds.
    const refused = await importRecording(app, recordingOf([{ path: 'k.txt', hash, size: content.length }]), A);
    const nobodys = await importRecording(app, recordingOf([{ path: 'k.txt', hash: nobodysHash, size: content.length }]), A);
    expect(withoutHashes(refused.errors![0].message)).toBe(withoutHashes(nobodys.errors![0].message));
    // B's copy stays, and B may still name it.
    const b = await gqlAs(B)(`query($id: ID!) { session(id: $id) { file(path: "k.txt") { text } } }`, { id: b1Id });
    expect(b.data.session.file.text).toBe(content);
    expect((await importRecording(app, recordingOf([{ path: 'k2.txt', hash, size: content.length }]), B)).errors).toBeUndefined();
  });
});
