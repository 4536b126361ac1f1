#!/usr/bin/env -S npx tsx
// `npx forkline …`: the typed client (client/client.ts) from a shell.
// FORKLINE_URL / --url and FORKLINE_TOKEN / --token say where and as whom.
import { randomUUID } from 'node:crypto';
import { parseArgs } from 'node:util';
import {
  ApiTokensDocument,
  BranchSessionDocument,
  CompactSessionDocument,
  CreateApiTokenDocument,
  CreateSessionDocument,
  createForklineClient,
  DeleteSessionDocument,
  EditMessageDocument,
  FanOutDocument,
  ForkSessionDocument,
  ForklineClientError,
  SearchSessionsDocument,
  SendMessageDocument,
  SessionDocument,
  SessionEventsDocument,
  SessionEventsLiveDocument,
  SessionShowDocument,
  SessionsDocument,
  RevokeApiTokenDocument,
  type ApiTokenFieldsFragment,
  type ApiTokenScope,
  SessionToolsDocument,
  SetSessionToolsDocument,
  ToolsDocument,
  type EventFieldsFragment,
  type ForklineClient,
  type ModelConfigInput,
  type SearchSessionsQuery,
  type SessionShowQuery,
  type SessionSummaryFragment,
  type ToolFieldsFragment,
} from '@forkline/client';
import { exportRecording } from './export-recording.ts';
import { importRecordingFile } from './import-recording.ts';
import { sendAndWait, turnOf } from './send-and-wait.ts';
import { printJson, printLine } from './terminal-output.ts';
import { visibleLines, visibleText } from '../src/core/visible-text.ts';
import { TAKEN_LOOKBACK, takenUnstartedAt, type TakenInput } from '../src/core/taken-inputs.ts';

const USAGE = `usage: forkline <command> [options]

commands:
  new [--title T] [--model P:M] [--instructions TEXT] [--message TEXT] [--wait]
                                            create a session (the server's default model without --model) and
                                            print it; --message queues its first message (--wait: stream the
                                            answer until that turn ends)
  sessions [--first N] [--parent ID]        list sessions, newest first
  show <id>                                 one session: its row, model, lineage, fork points, last turn and answer
  events <id> [--after N] [--first N] [--follow]
                                            print events as JSON lines, whole (--first: at most N; --follow: keep
                                            printing live ones)
  fork <id> [--at SEQ] [--title T]          fork at an exact event (omitted: through the last turn/end)
  branch <id> [--anchor SEQ] [--title T]    branch through the first turn/end at or after the anchor
      fork and branch also take [--model P:M] [--message TEXT] [--wait]: the child's model, and a message
      its agent starts on at once (--wait: until that turn ends, printing its answer)
  edit <id> <inputId> <text> [--model P:M] [--title T] [--wait]
                                            edit and re-run: a child forked right before that input, answering TEXT
  fanout <id> [--at SEQ | --anchor SEQ] [<message>...] [--model P:M]... [--wait]
                                            one child per variant (at most 16): one message or model each (a single
                                            one goes to every variant); --wait prints each child's answer
  send <id> <text> [--wait]                 queue a message (--wait: stream the answer until its turn ends)
  compact <id> [--through SEQ] [--instructions TEXT]
                                            replace the model-visible history through SEQ (default: the end of the
                                            last completed turn) by the session's model's summary; waits for a
                                            running turn, returns once the summary is written
  export <id> [--output FILE] [--progress]  the session's recording (JSON Lines, format V4) to stdout or FILE,
                                            streamed as the server reads it (any size); progress on stderr when it
                                            is a terminal (--progress: always)
  import <file|-> [--progress]              import a recording as a new session, streamed (any size); progress on
                                            stderr when it is a terminal (--progress: always)
  delete <id> [--with-descendants]          delete a session (and, with the flag, every fork below it)
  search <query> [--first N] [--after CURSOR] [--json]
                                            full-text search over titles, inputs and answers, best first:
                                            session@seq, kind, title, snippet (--json: one hit per line)
  tokens create <name> [--scope S]... [--expires 30d|12h|ISO-DATE]
                                            a new API token of your tenant (scopes: read, the default; write; admin;
                                            each includes the ones before it); prints its secret, shown only once
  tokens list                               your tenant's API tokens (never their secrets)
  tokens revoke <id>                        revoke one: its requests are refused and its sockets closed
      the tokens verbs need a token with the admin scope (FORKLINE_API_TOKENS' tokens have it)
  tools [<id>] [--set LIST] [--json]        the tools a session may be offered (the catalog: built-ins and MCP
                                            servers' <server>__<tool>): name, server, effect, description; with
                                            an id, that session's set; --set 'fs__*,clock' changes it ('*': all,
                                            '': none) from the end of its log (--json: one tool per line)

options:
  --url URL      GraphQL endpoint (FORKLINE_URL; default http://127.0.0.1:4000/graphql)
  --token T      API token (FORKLINE_TOKEN)
  --json         machine-readable output (new, sessions, show, fork, branch, edit, fanout, send, compact, import, search, tokens, tools)
  --model P:M    a model as provider:model, e.g. scripted:m2 or openai:gpt-4o-mini
  --max-response-bytes N   largest answer read from the server (default 128 MiB: maxResponseBytes of @forkline/client)
  --response-timeout-ms N  longest wait for a whole answer, and for an import's answer once its recording is
                           sent and each next progress line while it waits for its outcome (default 60000:
                           responseTimeoutMs); a long import that makes progress is never cut
`;

class UsageError extends Error {}

const OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  first: { type: 'string' },
  parent: { type: 'string' },
  after: { type: 'string' },
  follow: { type: 'boolean' },
  at: { type: 'string' },
  anchor: { type: 'string' },
  title: { type: 'string' },
  model: { type: 'string', multiple: true },
  message: { type: 'string' },
  wait: { type: 'boolean' },
  json: { type: 'boolean' },
  'with-descendants': { type: 'boolean' },
  scope: { type: 'string', multiple: true },
  expires: { type: 'string' },
  set: { type: 'string' },
  through: { type: 'string' },
  instructions: { type: 'string' },
  output: { type: 'string', short: 'o' },
  progress: { type: 'boolean' },
  'max-response-bytes': { type: 'string' },
  'response-timeout-ms': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Options = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values'];

function int(name: string, value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^-?\d+$/.test(value)) throw new UsageError(`--${name} must be an integer, got "${value}"`);
  return Number(value);
}

/** The most a page of sessions or search hits holds (the server's page size limit, docs/api.md). */
const MAX_FIRST = 500;

/** `--first`: a page size, checked here (past the limit the server names its query cost, not the option). */
function pageSize(value: string | undefined): number | undefined {
  const n = int('first', value);
  if (n !== undefined && (n < 1 || n > MAX_FIRST)) throw new UsageError(`--first must be between 1 and ${MAX_FIRST}, got ${n}`);
  return n;
}

function need(args: string[], count: number, what: string): string[] {
  if (args.length !== count) throw new UsageError(`expected ${what}`);
  return args;
}

const out = (line: string) => printLine(line);
/** `value` as a JSON line with --json, else `line` for people. */
function print(json: boolean | undefined, value: unknown, line: () => string) {
  if (json) printJson(value);
  else out(line());
}

/** `provider:model` (the model name may itself hold colons: `openai:llama3:8b`). */
function model(value: string): ModelConfigInput {
  const colon = value.indexOf(':');
  if (colon <= 0 || colon === value.length - 1) throw new UsageError(`--model must be provider:model (e.g. scripted:m2), got "${value}"`);
  return { provider: value.slice(0, colon), model: value.slice(colon + 1) };
}

/** At most one --model (fork, branch, edit). */
function oneModel(values: string[] | undefined): ModelConfigInput | undefined {
  if (values && values.length > 1) throw new UsageError('give --model once here');
  return values?.[0] === undefined ? undefined : model(values[0]);
}

/** Fan-out variants: the longer of messages and models sets the count; a list of one goes to every variant. */
function variants(messages: string[], models: string[]): Array<{ message?: string; model?: ModelConfigInput }> {
  const n = Math.max(messages.length, models.length);
  if (n === 0) throw new UsageError('expected at least one message or --model: forkline fanout <id> <message>... [--model P:M]...');
  for (const [name, list] of [
    ['messages', messages],
    ['--model values', models],
  ] as const) {
    if (list.length > 1 && list.length !== n) throw new UsageError(`${list.length} ${name} for ${n} variants: give one, or one per variant`);
  }
  const pick = <T>(list: T[], i: number) => (list.length === 1 ? list[0] : list[i]);
  return Array.from({ length: n }, (_, i) => ({ message: pick(messages, i), model: models.length ? model(pick(models, i)) : undefined }));
}

/** Waits for each child's queued input to be answered; prints the answers; true when every turn completed. */
async function waitForAnswers(client: ForklineClient, children: Array<{ id: string; firstLiveSeq: number; inputId?: string | null }>, json: boolean) {
  const answers = await Promise.all(
    children.map(async (c) =>
      c.inputId ? { id: c.id, ...(await turnOf(client, c.id, c.inputId, c.firstLiveSeq - 1)) } : { id: c.id, turn: undefined, reason: 'idle', text: '' },
    ),
  );
  for (const a of answers) print(json, a, () => `${a.id}  ${a.reason.padEnd(9)}  ${a.text.replace(/\n/g, ' ')}`);
  return answers.every((a) => a.reason === 'completed' || a.reason === 'idle');
}

/**
 * fetch, saying once on stderr that the server cannot be reached while the
 * client retries (for up to its 15 s), so a wrong URL or a stopped server is
 * not a silent wait before the error. Said at the second failure: the first
 * retry (a request that is not retried fails with its error at once).
 */
function sayingUnreachable(url: string): typeof fetch {
  let failures = 0;
  return async (input, init) => {
    try {
      return await fetch(input, init);
    } catch (err) {
      if (++failures === 2) {
        const cause = (err as Error).cause instanceof Error ? ((err as Error).cause as Error).message : (err as Error).message;
        process.stderr.write(`forkline: cannot reach ${url} (${cause}); trying again for up to 15 s (Ctrl-C to stop)\n`);
      }
      throw err;
    }
  };
}

/** A file can be read again: a lost connection or a 503 retries the upload (same key, so it imports once). */
async function retryUpload<T>(send: () => Promise<T>, rereadable: boolean): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await send();
    } catch (err) {
      const retryable = err instanceof ForklineClientError && (err.code === 'NETWORK_ERROR' || err.status === 503);
      if (!rereadable || !retryable || attempt >= 4) throw err;
      await new Promise((r) => setTimeout(r, ((err as ForklineClientError).retryAfter ?? attempt) * 1000));
    }
  }
}

const SCOPES: Record<string, ApiTokenScope> = { read: 'READ', write: 'WRITE', admin: 'ADMIN' };

/** --scope values (repeated or comma-separated); none: read. */
function scopes(values: string[] | undefined): ApiTokenScope[] {
  const names = (values ?? ['read']).flatMap((v) => v.split(',')).map((v) => v.trim().toLowerCase());
  return names.map((n) => {
    if (!Object.hasOwn(SCOPES, n)) throw new UsageError(`--scope must be read, write or admin, got "${n}"`);
    return SCOPES[n];
  });
}

/** --expires: a duration from now (90s, 30m, 12h, 30d) or a date (ISO 8601). */
function expiry(value: string | undefined): string | undefined {
  if (value === undefined) return undefined;
  const d = /^(\d+)([smhd])$/.exec(value);
  const at = d ? Date.now() + Number(d[1]) * { s: 1e3, m: 60e3, h: 3600e3, d: 86400e3 }[d[2] as 's' | 'm' | 'h' | 'd'] : Date.parse(value);
  if (!Number.isFinite(at)) throw new UsageError(`--expires must be a duration (30d, 12h, 30m, 90s) or an ISO date, got "${value}"`);
  return new Date(at).toISOString();
}

function tokenLine(k: ApiTokenFieldsFragment): string {
  const scopes = k.scopes.map((s) => s.toLowerCase()).join(',');
  const when = k.revokedAt ? `revoked ${k.revokedAt}` : k.expiresAt ? `expires ${k.expiresAt}` : 'no expiry';
  return `${k.id}  ${k.status.padEnd(7)}  ${scopes.padEnd(16)}  ${when}  last used ${k.lastUsedAt ?? 'never'}  ${k.name}`;
}

async function tokens(client: ForklineClient, [verb, ...args]: string[], opts: Options): Promise<number> {
  switch (verb) {
    case 'create': {
      const [name] = need(args, 1, 'a name: forkline tokens create <name> [--scope S]... [--expires 30d]');
      const { createApiToken } = await client.mutate(CreateApiTokenDocument, { input: { name, scopes: scopes(opts.scope), expiresAt: expiry(opts.expires) } });
      if (opts.json) printJson(createApiToken);
      else {
        out(createApiToken.secret); // alone on stdout: TOKEN=$(forkline tokens create ci --scope write)
        printLine(tokenLine(createApiToken.token), process.stderr);
        process.stderr.write('the secret above is shown only now: keep it\n');
      }
      return 0;
    }
    case 'list': {
      need(args, 0, 'no arguments: forkline tokens list');
      const { apiTokens } = await client.query(ApiTokensDocument);
      for (const k of apiTokens) print(opts.json, k, () => tokenLine(k));
      return 0;
    }
    case 'revoke': {
      const [id] = need(args, 1, 'a token id: forkline tokens revoke <id> (forkline tokens list shows them)');
      const { revokeApiToken } = await client.mutate(RevokeApiTokenDocument, { id });
      print(opts.json, revokeApiToken, () => `revoked ${revokeApiToken.id} (${revokeApiToken.name}) at ${revokeApiToken.revokedAt}`);
      return 0;
    }
    default:
      throw new UsageError(verb ? `unknown tokens verb "${verb}" (create, list, revoke)` : 'expected create, list or revoke: forkline tokens <verb>');
  }
}

function summaryLine(s: SessionSummaryFragment): string {
  const parent = s.parent ? `  fork of ${s.parent.id}@${s.forkedAtSeq}` : '';
  // An external runner pool's session: its pool, and the runner holding it now.
  const pool = s.runner ? `  runner pool ${s.runner}${s.runnerHolder ? ` (held by ${s.runnerHolder})` : ''}` : '';
  return `${s.id}  ${s.status.padEnd(7)}  ${String(s.eventCount).padStart(5)} events  ${String(s.turnCount).padStart(3)} turns  ${s.title ?? '(untitled)'}${parent}${pool}`;
}

/** `forkline show`: the session's row, then one line per thing known of it (nothing for what it has not). */
function showLines(s: NonNullable<SessionShowQuery['session']>): string[] {
  const clip = (t: string, n = 200) => {
    const one = t.replace(/\s+/g, ' ').trim();
    return one.length > n ? `${one.slice(0, n - 1)}…` : one;
  };
  const lines = [summaryLine(s), `  created ${s.createdAt}, last changed ${s.updatedAt}, format v${s.formatVersion}`];
  if (s.model) lines.push(`  model ${s.model.provider}:${s.model.model}`);
  if (s.parent)
    lines.push(`  inherits ${s.inheritedEventCount} events of "${s.parent.title ?? 'untitled'}" (0..${s.forkedAtSeq}); its own from seq ${s.firstLiveSeq}`);
  if (s.instructions) lines.push(`  instructions: ${clip(s.instructions)}`);
  if (s.forkPoints.length) {
    const children = s.forkPoints.reduce((n, p) => n + p.childCount, 0);
    lines.push(
      `  ${children} child${children === 1 ? '' : 'ren'} forked at seq ${s.forkPoints.map((p) => (p.childCount > 1 ? `${p.seq} (${p.childCount})` : p.seq)).join(', ')}`,
    );
  }
  const t = s.lastTurn;
  if (t) {
    const took = t.durationMs == null ? '' : `, ${t.durationMs} ms`;
    // A text the server cut may have come empty: it is still named, and its note follows.
    const input = t.input || t.inputTruncated ? `, input: ${clip(t.input ?? '', 120)}` : '';
    lines.push(`  last turn ${t.turn}: ${t.reason ?? 'running'}${took}${input}`);
    if (t.inputTruncated) lines.push(`    ${cutNote(s.id, 'input', t.inputSeq, { read: t.input?.length ?? 0 })}`);
    if (t.error || t.errorTruncated) lines.push(`    error: ${clip(t.error ?? '')}`);
    if (t.errorTruncated) lines.push(`    ${cutNote(s.id, 'error', t.errorSeq, { read: t.error?.length ?? 0 })}`);
  }
  const a = s.lastAnswer;
  if (a) {
    lines.push(`  last answer (seq ${a.seq}${a.inherited ? ', inherited' : ''}): ${clip(a.text) || (a.textTruncated ? '' : '(tool calls only)')}`);
    if (a.textTruncated) lines.push(`    ${cutNote(s.id, 'answer', a.seq, { whole: a.textLength })}`);
  }
  return lines;
}

/**
 * What `show` says under a text the server cut (a request reads a budget of such texts, docs/api.md "Texts in one
 * request"): that it is cut, how long it is (or how much came), and the command that prints its event whole.
 */
function cutNote(id: string, what: string, seq: number | null | undefined, size: { whole: number } | { read: number }): string {
  const n = (v: number) => v.toLocaleString('en-US');
  const how = 'whole' in size ? `${n(size.whole)} characters in all` : `the server sent its first ${n(size.read)} characters`;
  const where = seq == null ? '' : `; the whole ${what} is in event ${seq}: forkline events ${id} --after ${seq - 1} --first 1`;
  return `… [cut: ${how}${where}]`;
}

const eventLine = (e: EventFieldsFragment) => ({
  seq: e.seq,
  type: e.type,
  data: e.data,
  ...(e.inherited ? { inherited: true } : {}),
  ...(e.synthetic ? { synthetic: true } : {}),
});

/** Inputs the parent's events just before a fork's cut leave taken but unstarted (core/taken-inputs.ts). */
async function takenAtCut(client: ForklineClient, parentId: string, cutSeq: number): Promise<TakenInput[]> {
  const from = Math.max(0, cutSeq - TAKEN_LOOKBACK);
  const { session } = await client.query(SessionEventsDocument, { id: parentId, afterSeq: from - 1, first: cutSeq - from + 1 });
  const events = new Map(session?.events.edges.map((e) => [e.node.seq, e.node]));
  return takenUnstartedAt((seq) => events.get(seq), cutSeq);
}

const takenLine = (u: TakenInput) =>
  `note: input ${visibleText(u.inputId)}${u.seq >= 0 ? ` (#${u.seq})` : ''} was taken but its turn had not started at the cut: nothing in the child will answer it; send it again to answer it`;

/** `first`: at most that many events (the rest of the log when undefined). */
async function printEvents(client: ForklineClient, id: string, after: number | undefined, follow: boolean, first?: number) {
  let left = first ?? Infinity;
  if (follow) {
    if (left <= 0) return;
    for await (const { sessionEvents } of client.subscribe(SessionEventsLiveDocument, { sessionId: id, afterSeq: after })) {
      printJson(eventLine(sessionEvents));
      if (--left <= 0) return;
    }
    return;
  }
  let cursor = after;
  while (left > 0) {
    const { session } = await client.query(SessionEventsDocument, { id, afterSeq: cursor, first: Math.min(left, MAX_FIRST) });
    if (!session) throw new ForklineClientError([{ message: `session ${id} not found`, extensions: { code: 'SESSION_NOT_FOUND' } }]);
    const events = session.events.edges.map((e) => e.node);
    for (const e of events) printJson(eventLine(e));
    left -= events.length;
    if (!session.events.pageInfo.hasNextPage || events.length === 0) return;
    cursor = events[events.length - 1].seq;
  }
}

/** A search hit on one line, shown as text (printLine's rule); matched words in bold on a terminal, between ⟦ ⟧ otherwise. */
function searchLine(h: SearchSessionsQuery['searchSessions']['edges'][number]['node'], tty: boolean): string {
  const shown = visibleText(h.snippet.replace(/\s+/g, ' '));
  const snippet = tty ? shown.replace(/⟦/g, '\x1b[1m').replace(/⟧/g, '\x1b[22m') : shown;
  const shared = h.descendants ? `  (shared by ${h.descendants} fork${h.descendants === 1 ? '' : 's'})` : '';
  return `${visibleText(`${h.session.id}@${h.seq}  ${h.kind.padEnd(7)}  ${h.session.title ?? '(untitled)'}`)}  ${snippet}${shared}`;
}

/** `--set 'fs__*, clock'`: names, `<server>__*` or `*`, comma-separated; '' for none. */
const toolSet = (value: string) =>
  value
    .split(',')
    .map((t) => t.trim())
    .filter(Boolean);

/** Tools as aligned columns: name, server (- for built-ins), effect, the description's first line. */
function printTools(tools: readonly ToolFieldsFragment[], json: boolean) {
  if (json) return tools.forEach((t) => printJson(t));
  const width = (f: (t: ToolFieldsFragment) => string) => Math.max(0, ...tools.map((t) => f(t).length));
  const server = (t: ToolFieldsFragment) => t.server ?? '-';
  const effect = (t: ToolFieldsFragment) => t.effect.toLowerCase().replace('_', '-');
  const [wn, ws, we] = [width((t) => t.name), width(server), width(effect)];
  for (const t of tools) {
    const description = t.description.split('\n')[0].trim();
    out(
      `${t.name.padEnd(wn)}  ${server(t).padEnd(ws)}  ${effect(t).padEnd(we)}  ${description.length > 100 ? `${description.slice(0, 99)}…` : description}`.trimEnd(),
    );
  }
  if (!tools.length) process.stderr.write('no tools\n');
}

/** A flag's whole number above 0, or undefined when not given (the client's default). */
function positiveInt(value: string | undefined, flag: string): number | undefined {
  if (value === undefined) return undefined;
  const n = Number(value);
  if (!Number.isSafeInteger(n) || n <= 0) throw new Error(`${flag} takes a whole number above 0, not ${JSON.stringify(visibleText(value))}`);
  return n;
}

async function run(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true });
  } catch (err) {
    // Node's message runs over lines ("Did you forget…?"): kept as lines, not one line of \x0a escapes.
    process.stderr.write(visibleLines(`forkline: ${(err as Error).message}\n`));
    process.stderr.write(`\n${USAGE}`);
    return 2;
  }
  const opts: Options = parsed.values;
  const [command, ...args] = parsed.positionals;
  if (opts.help || !command) {
    (opts.help ? process.stdout : process.stderr).write(USAGE);
    return opts.help ? 0 : 2;
  }
  const url = opts.url ?? process.env.FORKLINE_URL ?? 'http://127.0.0.1:4000/graphql';
  let bounds: { maxResponseBytes?: number; responseTimeoutMs?: number };
  try {
    bounds = {
      maxResponseBytes: positiveInt(opts['max-response-bytes'], '--max-response-bytes'),
      responseTimeoutMs: positiveInt(opts['response-timeout-ms'], '--response-timeout-ms'),
    };
  } catch (err) {
    process.stderr.write(`forkline: ${(err as Error).message}\n`);
    return 2;
  }
  const client = createForklineClient({ url, token: opts.token ?? process.env.FORKLINE_TOKEN, fetch: sayingUnreachable(url), ...bounds });
  try {
    switch (command) {
      case 'new': {
        need(args, 0, 'no arguments: forkline new [--title T] [--model P:M] [--instructions TEXT] [--message TEXT] [--wait]');
        if (opts.wait && opts.message === undefined) throw new UsageError('--wait waits for the answer to --message: give one');
        const input = { title: opts.title, model: oneModel(opts.model), instructions: opts.instructions };
        const { createSession } = await client.mutate(CreateSessionDocument, { input });
        print(opts.json, createSession, () => summaryLine(createSession));
        if (opts.message === undefined) return 0;
        if (opts.wait) return (await sendAndWait(client, createSession.id, opts.message, opts.json ?? false)) === 'completed' ? 0 : 1;
        const { sendMessage } = await client.mutate(SendMessageDocument, { input: { sessionId: createSession.id, text: opts.message } });
        print(opts.json, sendMessage, () => `queued ${sendMessage.inputId} at seq ${sendMessage.event.seq}`);
        return 0;
      }
      case 'show': {
        const [id] = need(args, 1, 'a session id: forkline show <id>');
        const { session } = await client.query(SessionShowDocument, { id });
        if (!session) throw new ForklineClientError([{ message: `session ${id} not found`, extensions: { code: 'SESSION_NOT_FOUND' } }]);
        if (opts.json) printJson(session);
        else for (const line of showLines(session)) out(line);
        return 0;
      }
      case 'sessions': {
        need(args, 0, 'no arguments');
        const { sessions } = await client.query(SessionsDocument, { first: pageSize(opts.first) ?? 50, parentId: opts.parent });
        for (const { node } of sessions.edges) print(opts.json, node, () => summaryLine(node));
        return 0;
      }
      case 'events': {
        const [id] = need(args, 1, 'a session id: forkline events <id>');
        const first = int('first', opts.first);
        if (first !== undefined && first < 1) throw new UsageError(`--first must be at least 1, got ${first}`);
        await printEvents(client, id, int('after', opts.after), opts.follow ?? false, first);
        return 0;
      }
      case 'fork':
      case 'branch':
      case 'edit': {
        const overrides = { title: opts.title, model: oneModel(opts.model) };
        let r;
        if (command === 'edit') {
          if (opts.message !== undefined) throw new UsageError('edit takes its text as an argument, not --message');
          const [id, inputId, text] = need(args, 3, 'a session id, an input id and a text: forkline edit <id> <inputId> <text>');
          r = (await client.mutate(EditMessageDocument, { input: { sessionId: id, inputId, text, ...overrides } })).editMessage;
        } else {
          const [id] = need(args, 1, `a session id: forkline ${command} <id>`);
          const input = { sessionId: id, ...overrides, message: opts.message };
          r =
            command === 'fork'
              ? (await client.mutate(ForkSessionDocument, { input: { ...input, atSeq: int('at', opts.at) } })).forkSession
              : (await client.mutate(BranchSessionDocument, { input: { ...input, anchorSeq: int('anchor', opts.anchor) } })).branchSession;
        }
        if (opts.json) printJson(r);
        else {
          out(summaryLine(r.session));
          const queued = r.inputId ? `; queued ${r.inputId}` : '';
          out(`cut at seq ${r.cutSeq}; ${r.syntheticEvents.length} synthetic closer(s)${queued}; the child's agent writes from seq ${r.session.firstLiveSeq}`);
          if (command === 'fork') for (const u of await takenAtCut(client, args[0], r.cutSeq)) out(takenLine(u));
        }
        if (opts.wait && r.inputId) return (await waitForAnswers(client, [{ ...r.session, inputId: r.inputId }], opts.json ?? false)) ? 0 : 1;
        return 0;
      }
      case 'fanout': {
        const [id, ...messages] = args;
        if (opts.message !== undefined) throw new UsageError('fanout takes its messages as arguments, not --message');
        if (!id) throw new UsageError('expected a session id: forkline fanout <id> <message>... [--model P:M]...');
        const at = int('at', opts.at);
        const anchor = int('anchor', opts.anchor);
        if (at !== undefined && anchor !== undefined) throw new UsageError('give --at or --anchor, not both');
        const input = { sessionId: id, atSeq: at, anchorSeq: anchor, variants: variants(messages, opts.model ?? []) };
        const { fanOut } = await client.mutate(FanOutDocument, { input });
        if (opts.json) printJson(fanOut);
        else {
          out(`cut at seq ${fanOut.cutSeq} of ${fanOut.parent.id}; ${fanOut.children.length} children:`);
          for (const c of fanOut.children) out(summaryLine(c));
        }
        if (!opts.wait) return 0;
        const children = fanOut.children.map((c, i) => ({ ...c, inputId: fanOut.forks[i].inputId }));
        return (await waitForAnswers(client, children, opts.json ?? false)) ? 0 : 1;
      }
      case 'send': {
        const [id, text] = need(args, 2, 'a session id and a text: forkline send <id> <text>');
        if (opts.wait) return (await sendAndWait(client, id, text, opts.json ?? false)) === 'completed' ? 0 : 1;
        const { sendMessage } = await client.mutate(SendMessageDocument, { input: { sessionId: id, text } });
        print(opts.json, sendMessage, () => `queued ${sendMessage.inputId} at seq ${sendMessage.event.seq}`);
        return 0;
      }
      case 'compact': {
        const [id] = need(args, 1, 'a session id: forkline compact <id> [--through SEQ] [--instructions TEXT]');
        const input = { sessionId: id, throughSeq: int('through', opts.through), instructions: opts.instructions };
        const { compactSession } = await client.mutate(CompactSessionDocument, { input });
        out(
          opts.json
            ? JSON.stringify(compactSession)
            : `compacted ${id}: seq ${compactSession.fromSeq}-${compactSession.toSeq} summarised at seq ${compactSession.summarySeq}`,
        );
        return 0;
      }
      case 'export': {
        const [id] = need(args, 1, 'a session id: forkline export <id> [--output FILE] [--progress]');
        const progress = (opts.progress ?? process.stderr.isTTY) ? process.stderr : undefined;
        await exportRecording(client, id, { output: opts.output, progress });
        return 0;
      }
      case 'import': {
        const [file] = need(args, 1, 'a file: forkline import <file|->');
        // Streamed: recordings may be far larger than a GraphQL argument should be.
        // One idempotency key for every attempt: a retry after a lost answer imports once.
        const idempotencyKey = randomUUID();
        const progress = (opts.progress ?? process.stderr.isTTY) ? process.stderr : undefined;
        const { id } = await retryUpload(() => importRecordingFile(client, file, { idempotencyKey, progress }), file !== '-');
        const { session } = await client.query(SessionDocument, { id });
        if (!session) throw new ForklineClientError([{ message: `session ${id} not found`, extensions: { code: 'SESSION_NOT_FOUND' } }]);
        print(opts.json, session, () => summaryLine(session));
        return 0;
      }
      case 'delete': {
        const [id] = need(args, 1, 'a session id: forkline delete <id> [--with-descendants]');
        const { deleteSession } = await client.mutate(DeleteSessionDocument, { id, withDescendants: opts['with-descendants'] ?? false });
        if (opts.json) printJson(deleteSession);
        else out(`deleted ${deleteSession.deletedSessionIds.length} session(s): ${deleteSession.deletedSessionIds.join(' ')}`);
        return 0;
      }
      case 'search': {
        const [query] = need(args, 1, 'a query: forkline search <query> (quote several words)');
        const { searchSessions } = await client.query(SearchSessionsDocument, { query, first: pageSize(opts.first), after: opts.after });
        for (const { node, cursor } of searchSessions.edges) {
          if (opts.json) printJson({ ...node, cursor });
          else process.stdout.write(`${searchLine(node, process.stdout.isTTY)}\n`); // shown as text already, bold added
        }
        const { hasNextPage, endCursor } = searchSessions.pageInfo;
        if (hasNextPage && !opts.json) process.stderr.write(`more: forkline search ${JSON.stringify(query)} --after ${endCursor}\n`);
        // A page that stopped at its bound of rows read may hold no hit and still have more.
        if (!searchSessions.edges.length && !opts.json) process.stderr.write(hasNextPage ? 'no match in the rows read so far\n' : 'no match\n');
        return 0;
      }
      case 'tokens':
        return await tokens(client, args, opts);
      case 'tools': {
        if (args.length > 1) throw new UsageError('expected at most a session id: forkline tools [<id>] [--set LIST]');
        const [id] = args;
        if (opts.set !== undefined) {
          if (!id) throw new UsageError("--set changes a session's tools: forkline tools <id> --set 'fs__*,clock'");
          const { setSessionTools } = await client.mutate(SetSessionToolsDocument, { input: { sessionId: id, tools: toolSet(opts.set) } });
          printTools(setSessionTools.tools, opts.json ?? false);
          return 0;
        }
        if (!id) {
          printTools((await client.query(ToolsDocument)).tools, opts.json ?? false);
          return 0;
        }
        const { session } = await client.query(SessionToolsDocument, { id });
        if (!session) throw new ForklineClientError([{ message: `session ${id} not found`, extensions: { code: 'SESSION_NOT_FOUND' } }]);
        printTools(session.tools, opts.json ?? false);
        return 0;
      }
      default:
        throw new UsageError(`unknown command "${command}"`);
    }
  } catch (err) {
    if (err instanceof UsageError) {
      printLine(`forkline: ${err.message}`, process.stderr);
      process.stderr.write(`\n${USAGE}`);
      return 2;
    }
    if (err instanceof ForklineClientError) {
      printLine(`forkline: ${err.code}: ${err.message}`, process.stderr);
      return 1;
    }
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') {
      printLine(`forkline: ${(err as Error).message}`, process.stderr);
      return 1;
    }
    throw err;
  } finally {
    await client.close();
  }
}

run(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (err) => {
    process.stderr.write(visibleLines(`forkline: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`));
    process.exit(1);
  },
);
