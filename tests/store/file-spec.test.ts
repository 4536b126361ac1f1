// The file workspace rows (tests/spec/file-spec.ts) against the store: the
// parent is made by the agent (the file tools run in its workspace), then
// SessionStore.fork cuts it and FileBlobs reads the trees, no GraphQL.
import { startTestApp, type TestApp } from '../helpers/app.ts';
import { fileSpec, fileSpecTools, type Files } from '../spec/file-spec.ts';

let app: TestApp;
const tools = fileSpecTools();
const scope = { tenant: 'local' };

async function filesOf(id: string, atSeq?: number): Promise<Files> {
  const { files } = app.services.store;
  const tree = await files.tree(id, atSeq);
  const contents = await files.contents(
    scope.tenant,
    [...tree.values()].map((e) => e.hash),
  );
  return Object.fromEntries([...tree.values()].map((e) => [e.path, contents.get(e.hash)!.toString('utf8')]));
}

fileSpec('SessionStore', {
  setup: async () => void (app = await startTestApp(tools)),
  teardown: () => app.close(),
  async createParent(turns) {
    const { id } = await app.services.store.createSession(scope, { title: 'files' });
    for (const text of turns) {
      await app.services.controller.sendMessage(scope, id, text);
      await app.services.host.idle();
    }
    return { id, events: await app.services.store.log.page(id, -1, 1000) };
  },
  filesAt: (id, seq) => filesOf(id, seq),
  async forkFiles(parentId, seq) {
    const f = await app.services.store.fork(scope, parentId, seq);
    return { childId: f.session.id, files: await filesOf(f.session.id, f.session.firstLiveSeq - 1) };
  },
});
