// The file workspace contract (docs/contract.md#repair, docs/contract.md#agent-loop) as one table: an
// agent writes, edits and deletes files over several turns (the built-in file
// tools, the shell and server-filesystem in its workspace), then a fork at
// EVERY event of that log must see exactly the files of that moment. The
// expected tree at a seq is computed here from the calls' arguments and their
// recorded results alone (a reference model of the file tools), never from
// the implementation's change sets; the store and the GraphQL API each run the
// table through a small initializer, like tests/spec/fork-spec.ts.
import { createRequire } from 'node:module';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parseMcpConfig, type McpConfig } from '../../src/agent/mcp/mcp-config.ts';

/** The parent's turns: scripted-model cues (src/agent/models/scripted.ts). */
export const FILE_SCENARIO: string[] = [
  [
    'turn 1: make two files, then edit one',
    '!call write_file {"path":"a.txt","content":"one\\ntwo\\nthree\\n"}',
    '!call write_file {"path":"dir/b.txt","content":"bee\\n"}',
    '!then',
    '!call edit_file {"path":"a.txt","oldText":"two","newText":"2"}',
  ].join('\n'),
  [
    'turn 2: delete one, add one, read one',
    '!call delete_file {"path":"dir/b.txt"}',
    '!call write_file {"path":"c.md","content":"# c\\n"}',
    '!then',
    '!call read_file {"path":"a.txt"}',
    '!call list_files {}',
  ].join('\n'),
  [
    'turn 3: edits, a rewrite to earlier content, and calls that fail',
    '!call edit_file {"path":"c.md","oldText":"# c","newText":"# see"}',
    '!call write_file {"path":"a.txt","content":"one\\ntwo\\nthree\\n"}',
    '!call edit_file {"path":"missing.txt","oldText":"x","newText":"y"}',
    '!then',
    '!call write_file {"path":"../escape.txt","content":"no"}',
    '!call write_file {"path":"dir/b.txt","content":"bee again\\n"}',
  ].join('\n'),
  [
    'turn 4: the shell and server-filesystem (the initializer offers both)',
    '!call shell {"command":"printf shell > s.txt && rm c.md"}',
    '!then',
    '!call fs__write_file {"path":"dir/fs.txt","content":"from fs\\n"}',
    '!call fs__edit_file {"path":"a.txt","edits":[{"oldText":"three","newText":"3"}]}',
  ].join('\n'),
];

/**
 * The log the scenario makes, one event type per seq: the spec's table has a
 * row per cut (a fork at each of these events), like the fork spec's
 * EXPECTED_CLOSERS. The scripted model makes the same log every time.
 */
export const FILE_SCENARIO_LOG: readonly string[] = [
  'session/title',
  'inbox/add',
  'inbox/remove',
  'turn/start',
  'step/start',
  'model/message',
  'plugin/files/change',
  'tool/result',
  'plugin/files/change',
  'tool/result',
  'step/end',
  'step/start',
  'model/message',
  'plugin/files/change',
  'tool/result',
  'step/end',
  'step/start',
  'model/message',
  'step/end',
  'turn/end',
  'inbox/add',
  'inbox/remove',
  'turn/start',
  'step/start',
  'model/message',
  'plugin/files/change',
  'tool/result',
  'plugin/files/change',
  'tool/result',
  'step/end',
  'step/start',
  'model/message',
  'tool/result',
  'tool/result',
  'step/end',
  'step/start',
  'model/message',
  'step/end',
  'turn/end',
  'inbox/add',
  'inbox/remove',
  'turn/start',
  'step/start',
  'model/message',
  'plugin/files/change',
  'tool/result',
  'plugin/files/change',
  'tool/result',
  'tool/result',
  'step/end',
  'step/start',
  'model/message',
  'tool/result',
  'plugin/files/change',
  'tool/result',
  'step/end',
  'step/start',
  'model/message',
  'step/end',
  'turn/end',
  'inbox/add',
  'inbox/remove',
  'turn/start',
  'step/start',
  'model/message',
  'plugin/files/change',
  'tool/result',
  'step/end',
  'step/start',
  'model/message',
  'plugin/mcp/result',
  'plugin/files/change',
  'tool/result',
  'plugin/mcp/result',
  'plugin/files/change',
  'tool/result',
  'step/end',
  'step/start',
  'model/message',
  'step/end',
  'turn/end',
];

/** What the scenario's shell commands do to the files (the reference model cannot run a shell). */
const SHELL_EFFECTS: Record<string, (files: Files) => void> = {
  'printf shell > s.txt && rm c.md': (files) => {
    files['s.txt'] = 'shell';
    delete files['c.md'];
  },
};

/**
 * What the initializers' apps offer besides the built-in file tools: the shell,
 * and server-filesystem in each session's workspace (docs/files.md).
 */
export function fileSpecTools(): { shell: true; mcp: McpConfig } {
  const server = createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/dist/index.js');
  return {
    shell: true,
    mcp: parseMcpConfig(
      JSON.stringify({ mcpServers: { fs: { command: process.execPath, args: [server, '${workspace}'], cwd: '${workspace}', workspace: 'only' } } }),
    ),
  };
}

export interface SpecEvent {
  seq: number;
  type: string;
  data: any;
}

/** Files as path → text content. */
export type Files = Record<string, string>;

export interface FileSpecInitializer {
  setup?(): Promise<void>;
  teardown?(): Promise<void>;
  /** Runs the scenario's turns in a new session's agent; returns its id and whole log. */
  createParent(turns: string[]): Promise<{ id: string; events: SpecEvent[] }>;
  /** The parent's own files as of a seq (no fork). */
  filesAt(parentId: string, seq: number): Promise<Files>;
  /** Forks at an exact seq and reads the child's files as of the end of its seed (its own agent may go on to answer input queued in the prefix). */
  forkFiles(parentId: string, seq: number): Promise<{ childId: string; files: Files }>;
  /**
   * Once the child's agent is idle, asks it to list its directory
   * (list_files): what it sees, and the child's files by its log right
   * before that call, path → size; optional.
   */
  agentSees?(childId: string): Promise<{ sees: Record<string, number>; logSays: Record<string, number> }>;
}

/**
 * The reference model: the files after each event. A file tool's call takes
 * effect with its `ok` result; an error result, or a call without a result,
 * changes nothing.
 */
export function expectedFilesBySeq(events: SpecEvent[]): Files[] {
  const calls = new Map<string, { name: string; args: any }>();
  const files: Files = {};
  const out: Files[] = [];
  for (const e of events) {
    if (e.type === 'model/message') for (const c of e.data.toolCalls) calls.set(c.id, { name: c.name, args: JSON.parse(c.arguments) });
    if (e.type === 'tool/result' && e.data.status === 'ok') {
      const { name, args } = calls.get(e.data.callId)!;
      if (name === 'write_file' || name === 'fs__write_file') files[args.path] = args.content;
      else if (name === 'edit_file') files[args.path] = files[args.path].replace(args.oldText, args.newText);
      else if (name === 'fs__edit_file') for (const ed of args.edits) files[args.path] = files[args.path].replace(ed.oldText, ed.newText);
      else if (name === 'delete_file') delete files[args.path];
      else if (name === 'shell') SHELL_EFFECTS[args.command](files);
    }
    out.push({ ...files });
  }
  return out;
}

/** Whether input waits in the inbox right after `seq` (a fork's agent answers it). */
function queuedAt(events: SpecEvent[], seq: number): boolean {
  const pending = new Set<string>();
  for (const e of events.slice(0, seq + 1)) {
    if (e.type === 'inbox/add') pending.add(e.data.inputId);
    if (e.type === 'inbox/remove') pending.delete(e.data.inputId);
  }
  return pending.size > 0;
}

export function fileSpec(name: string, impl: FileSpecInitializer) {
  describe(`file spec: ${name}`, () => {
    let parent: { id: string; events: SpecEvent[] };
    let expected: Files[];
    beforeAll(async () => {
      await impl.setup?.();
      parent = await impl.createParent(FILE_SCENARIO);
      expected = expectedFilesBySeq(parent.events);
    });
    afterAll(async () => impl.teardown?.());

    it('the scenario ran as scripted: the log of the table, every file tool answered, two calls failed and changed nothing', () => {
      expect(parent.events.map((e) => e.type)).toEqual(FILE_SCENARIO_LOG);
      const results = parent.events.filter((e) => e.type === 'tool/result').map((e) => [e.data.name, e.data.status]);
      expect(results).toEqual([
        ['write_file', 'ok'],
        ['write_file', 'ok'],
        ['edit_file', 'ok'],
        ['delete_file', 'ok'],
        ['write_file', 'ok'],
        ['read_file', 'ok'],
        ['list_files', 'ok'],
        ['edit_file', 'ok'],
        ['write_file', 'ok'],
        ['edit_file', 'error'],
        ['write_file', 'error'],
        ['write_file', 'ok'],
        ['shell', 'ok'],
        ['fs__write_file', 'ok'],
        ['fs__edit_file', 'ok'],
      ]);
      expect(expected.at(-1)).toEqual({ 'a.txt': 'one\ntwo\n3\n', 'dir/b.txt': 'bee again\n', 'dir/fs.txt': 'from fs\n', 's.txt': 'shell' });
      // Every call is recorded with the effect and the workspace scope repair reads.
      const calls = parent.events.filter((e) => e.type === 'model/message').flatMap((e) => e.data.toolCalls);
      expect(calls.every((c: any) => c.files === (c.name === 'shell' ? 'also' : 'only') && c.effect)).toBe(true);
    });

    // One row per cut: the parent read at that seq, and a fork there, hold exactly the files of that moment (a cut before a result: as before the call).
    FILE_SCENARIO_LOG.forEach((type, seq) => {
      it(`cut at ${seq} (${type}): the parent at it and a fork there hold the files of that moment`, async () => {
        expect(await impl.filesAt(parent.id, seq), 'the parent').toEqual(expected[seq]);
        const { childId, files } = await impl.forkFiles(parent.id, seq);
        expect(files, 'the fork').toEqual(expected[seq]);
        if (impl.agentSees) {
          // Its directory is made from its log, wherever the cut fell (and whatever input queued in the prefix it answered first).
          const { sees, logSays } = await impl.agentSees(childId);
          expect(sees, "the fork's agent").toEqual(logSays);
          if (!queuedAt(parent.events, seq)) {
            expect(sees).toEqual(Object.fromEntries(Object.entries(expected[seq]).map(([p, text]) => [p, Buffer.byteLength(text)])));
          }
        }
      });
    });
  });
}
