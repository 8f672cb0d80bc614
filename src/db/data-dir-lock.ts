/**
 * One process per embedded data folder. PGlite has no postmaster to refuse a
 * second opener: two processes on one folder corrupt each other's cluster (or
 * the second dies in a WASM abort). The lock is a file next to the folder
 * holding the owner's pid, created whole and exclusively (a hard link fails
 * if the name exists, so nobody ever reads a half-written lock); a lock whose
 * process is gone (kill -9, a crash, a reboot) is stale and taken over.
 */
import { linkSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { ConfigError } from '../config.js';

/** The lock file of a data folder: beside it, so the folder holds only what PGlite writes. */
export function lockPath(dataDir: string): string {
  const abs = resolve(dataDir);
  return join(dirname(abs), `${basename(abs)}.lock`);
}

/** The pid written in the lock, or undefined when there is no lock. */
function readHolder(path: string): string | undefined {
  try {
    return readFileSync(path, 'utf8').trim();
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
}

function alive(pid: number): boolean {
  if (!Number.isInteger(pid) || pid <= 0 || pid === process.pid) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    // EPERM: it exists, it is only somebody else's.
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes the folder's lock or throws a `ConfigError` naming the folder and the
 * pid that holds it. Returns the release function (also run at exit).
 */
export function lockDataDir(dataDir: string): () => void {
  const path = lockPath(dataDir);
  const mine = `${path}.${process.pid}`;
  writeFileSync(mine, `${process.pid}\n`);
  try {
    for (let tries = 0; ; tries++) {
      try {
        linkSync(mine, path);
        break;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST' || tries >= 3) throw err;
      }
      const holder = readHolder(path);
      if (holder === undefined) continue; // released meanwhile: try again
      if (alive(Number.parseInt(holder, 10))) {
        throw new ConfigError(
          `IDEM_DATA_DIR ${resolve(dataDir)} is in use by another idem process (pid ${holder}); ` +
            'stop it, or point IDEM_DATA_DIR at another folder',
        );
      }
      // Stale: its process is gone. Re-read first, so a lock just taken over by another starter stays.
      if (readHolder(path) === holder) rmSync(path, { force: true });
    }
  } finally {
    rmSync(mine, { force: true });
  }
  let released = false;
  const release = () => {
    if (released) return;
    released = true;
    process.removeListener('exit', release);
    if (readHolder(path) === String(process.pid)) rmSync(path, { force: true });
  };
  process.once('exit', release);
  return release;
}
