// A process that outlives the shell call that started it, as a command run
// unsandboxed (or a workspace MCP server's child) may leave: it goes on acting
// in the workspace while forkline's file tools, scans and restores run.
import fs from 'node:fs';
import path from 'node:path';

export function detachedProcesses(dir: () => string) {
  /** Pid files of the processes started, each test ends them (`endAll`). */
  const pidFiles: string[] = [];
  return {
    /**
     * A shell command that starts `node -e script` detached, with the
     * workspace's absolute path as its last argument, and returns once it
     * runs. It ends itself after 20 s; `endAll` ends it before, by its pid.
     */
    start(script: string): string {
      const file = path.join(dir(), `detached-${pidFiles.length}.cjs`);
      const pidFile = `${file}.pid`;
      fs.writeFileSync(
        file,
        `require('fs').writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setTimeout(() => process.exit(0), 20000);\n${script}`,
      );
      pidFiles.push(pidFile);
      return `setsid node ${file} "$PWD" >/dev/null 2>&1 </dev/null & while [ ! -s ${pidFile} ]; do sleep 0.05; done`;
    },
    endAll(): void {
      for (const f of pidFiles.splice(0)) {
        try {
          process.kill(Number(fs.readFileSync(f, 'utf8')), 'SIGKILL');
        } catch {
          // already gone
        }
      }
    },
  };
}
