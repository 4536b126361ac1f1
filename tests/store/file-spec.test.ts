// The file workspace rows (tests/spec/file-spec.ts) against the store: the
// parent is made by the agent (the file tools run in its workspace), then
// SessionStore.fork cuts it and FileBlobs reads the trees, no GraphQL.
import { startTestApp, type TestApp } from '../helpers/app.ts';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { loadMcpConfig } from '../../src/agent/mcp/mcp-config.ts';
import { fileSpec, fileSpecMcpConfig, type Files } from '../spec/file-spec.ts';

const configDir = fs.mkdtempSync(path.join(os.tmpdir(), 'file-spec-'));
/** server-filesystem in each session's workspace, beside the built-in tools and the shell. */
function writeMcpConfig(): string {
  const file = path.join(configDir, 'mcp.json');
  fs.writeFileSync(file, JSON.stringify(fileSpecMcpConfig(createRequire(import.meta.url).resolve('@modelcontextprotocol/server-filesystem/dist/index.js'))));
  return file;
}

let app: TestApp;
const scope = { tenant: 'local' };

async function filesOf(id: string, atSeq?: number): Promise<Files> {
  const { files } = app.services.store;
  const tree = await files.tree(id, atSeq);
  const contents = await files.contents([...tree.values()].map((e) => e.hash));
  return Object.fromEntries([...tree.values()].map((e) => [e.path, contents.get(e.hash)!.toString('utf8')]));
}

fileSpec('SessionStore', {
  setup: async () => void (app = await startTestApp({ shell: true, mcp: loadMcpConfig(writeMcpConfig()) })),
  teardown: async () => {
    await app.close();
    fs.rmSync(configDir, { recursive: true, force: true });
  },
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
