// Text from outside the log's rules — a model's answer, a tool's output — is
// made storable before it is appended: NUL and unpaired surrogates become
// U+FFFD, so one stray code unit does not fail the turn at append.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { anyData } from '../helpers/event-data.ts';
import { isStorableText, toStorableJson, toStorableText, unstorableReason } from '../../src/core/storable.ts';

describe('toStorableText', () => {
  it('replaces NUL and unpaired surrogates, keeps pairs and other text', () => {
    expect(toStorableText('a\u0000b')).toBe('a\uFFFDb');
    expect(toStorableText('high \uD800 alone, low \uDC00 alone')).toBe('high \uFFFD alone, low \uFFFD alone');
    expect(toStorableText('reversed \uDC00\uD800')).toBe('reversed \uFFFD\uFFFD');
    expect(toStorableText('pair 😀 kept, é too')).toBe('pair 😀 kept, é too');
    for (const s of ['a\u0000', '\uD800', 'x\uDBFF', '\uDFFFy']) expect(isStorableText(toStorableText(s))).toBe(true);
  });
});

describe('toStorableJson', () => {
  it('makes text and keys storable, keeps structure, and keeps what lies past the depth limit as its JSON text', () => {
    expect(toStorableJson({ 'k\u0000': ['a\uD800', 1, null, true, { x: 'ok' }] })).toEqual({ 'k\uFFFD': ['a\uFFFD', 1, null, true, { x: 'ok' }] });
    let deep: unknown = 'bottom';
    for (let i = 0; i < 5000; i++) deep = [deep];
    const kept = toStorableJson({ deep });
    expect(unstorableReason(kept)).toBeUndefined();
    expect(unstorableReason({ deep })).toMatch(/nested deeper/);
  });
});

describe('a lone surrogate in a tool output', () => {
  let app: TestApp;
  beforeAll(async () => {
    app = await startTestApp();
  });
  afterAll(async () => {
    await app.close();
  });

  it('is stored as U+FFFD and the turn completes', async () => {
    const { createSession } = await app.ok(`mutation { createSession(input: { title: "surrogates" }) { id } }`);
    const id = createSession.id as string;
    // The JSON escape reaches the tool as a lone high surrogate; note_read hands it back as its output.
    const text = '!call note_write {"key":"k","value":"a\\ud800b"}\n!then\n!call note_read {"key":"k"}';
    await app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId: id, text } });
    await app.services.host.idle();
    const events = await app.services.store.log.page(id, -1, 1000);
    expect(events.at(-1)).toMatchObject({ type: 'turn/end', data: { reason: 'completed' } });
    const results = events.filter((e) => e.type === 'tool/result').map((e) => [anyData(e).name, anyData(e).status, anyData(e).content]);
    expect(results).toEqual([
      ['note_write', 'ok', 'wrote note "k"'],
      ['note_read', 'ok', 'a\uFFFDb'],
    ]);
  });
});
