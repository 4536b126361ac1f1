// One forkline per embedded data directory. Postgres' own postmaster.pid
// keeps two postmasters apart, but not two forklines: a second `npm start`
// used to stop the first one's live Postgres as "stale". The owner's pid is in
// `<dir>/forkline.lock`; a start finding a live owner refuses, naming it; a
// lock whose owner is dead is taken over (and only then is a postmaster left
// running in the directory an orphan that may be stopped).
import fs from 'node:fs';
import path from 'node:path';
import { isProcessAlive } from '../pid-alive.ts';

export class DataDirBusyError extends Error {
  name = 'DataDirBusyError';
}

export interface DataDirLock {
  readonly path: string;
  release(): void;
}

function ownerOf(file: string): number | undefined {
  try {
    const pid = Number(JSON.parse(fs.readFileSync(file, 'utf8')).pid);
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  } catch {
    return undefined; // missing, or being written right now
  }
}

/** Takes `<dir>/forkline.lock` for this process, or throws DataDirBusyError naming the live owner. */
export function lockDataDir(dir: string): DataDirLock {
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, 'forkline.lock');
  const mine = JSON.stringify({ pid: process.pid, startedAt: new Date().toISOString() });
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      fs.writeFileSync(file, mine, { flag: 'wx', mode: 0o644 });
      const release = () => {
        if (ownerOf(file) === process.pid) fs.rmSync(file, { force: true });
        process.off('exit', release);
      };
      process.on('exit', release);
      return { path: file, release };
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
    }
    const owner = ownerOf(file);
    if (owner === undefined) {
      // Just created by another start that has not written its pid yet.
      Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, 20);
      continue;
    }
    if (owner !== process.pid && isProcessAlive(owner)) {
      throw new DataDirBusyError(
        `another forkline (pid ${owner}) is running on ${dir}; stop it first, or give this one its own FORKLINE_DATA_DIR or a DATABASE_URL`,
      );
    }
    // The owner is gone: take the lock over. Renaming the stale file away (not
    // deleting it) keeps two starts that both saw it from both succeeding.
    const stale = `${file}.stale-${process.pid}`;
    try {
      fs.renameSync(file, stale);
      // Not the file we judged (a new owner's, written in between): put it back unless yet another exists.
      if (ownerOf(stale) !== owner) fs.linkSync(stale, file);
    } catch {
      // someone else moved it first: look again
    } finally {
      fs.rmSync(stale, { force: true });
    }
  }
  throw new DataDirBusyError(`could not lock ${dir} (another start keeps racing for it)`);
}
