// The file workspace rows (tests/spec/file-spec.ts) over HTTP: the parent made
// with sendMessage, every cut made with forkSession, the trees read with
// Session.files and Session.file, and each fork's own agent asked what it
// sees in its directory (list_files): its tree made from the log at the cut.
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { fileSpec, fileSpecTools, type Files } from '../spec/file-spec.ts';

let app: TestApp;
const tools = fileSpecTools();
const FILES = `query($id: ID!, $atSeq: Int) { session(id: $id) { files(atSeq: $atSeq) { path size hash seq } } }`;
const FILE = `query($id: ID!, $path: String!, $atSeq: Int) { session(id: $id) { file(path: $path, atSeq: $atSeq) { path size hash text base64 } } }`;
const FORK = `mutation($i: ForkSessionInput!) { forkSession(input: $i) { session { id firstLiveSeq } } }`;
const EVENTS = `query($id: ID!) { session(id: $id) { events(first: 500) { edges { node { seq type data } } } } }`;

const events = async (id: string) => (await app.ok(EVENTS, { id })).session.events.edges.map((e: any) => e.node);
const send = (sessionId: string, text: string) => app.ok(`mutation($i: SendMessageInput!) { sendMessage(input: $i) { inputId } }`, { i: { sessionId, text } });

async function filesOf(id: string, atSeq?: number): Promise<Files> {
  const entries = (await app.ok(FILES, { id, atSeq })).session.files as Array<{ path: string }>;
  const out: Files = {};
  for (const { path } of entries) out[path] = (await app.ok(FILE, { id, path, atSeq })).session.file.text;
  return out;
}

fileSpec('GraphQL API', {
  setup: async () => void (app = await startTestApp(tools)),
  teardown: () => app.close(),
  async createParent(turns) {
    const { id } = (await app.ok(`mutation { createSession(input: { title: "files" }) { id } }`)).createSession;
    for (const text of turns) {
      await send(id, text);
      await app.services.host.idle();
    }
    return { id, events: await events(id) };
  },
  filesAt: (id, seq) => filesOf(id, seq),
  async forkFiles(parentId, atSeq) {
    const child = (await app.ok(FORK, { i: { sessionId: parentId, atSeq } })).forkSession.session;
    return { childId: child.id, files: await filesOf(child.id, child.firstLiveSeq - 1) };
  },
  async agentSees(childId) {
    await app.services.host.idle();
    await send(childId, '!call list_files {}');
    await app.services.host.idle();
    const result = (await events(childId)).findLast((e: any) => e.type === 'tool/result');
    const entries = (await app.ok(FILES, { id: childId, atSeq: result.seq - 1 })).session.files as Array<{ path: string; size: number }>;
    const logSays = Object.fromEntries(entries.map((f) => [f.path, f.size]));
    if (result.data.content === 'no files') return { sees: {}, logSays };
    const sees = Object.fromEntries(
      (result.data.content as string).split('\n').map((line) => {
        const [, path, size] = line.match(/^(.*) \((\d+) bytes?\)$/)!;
        return [path, Number(size)];
      }),
    );
    return { sees, logSays };
  },
});
