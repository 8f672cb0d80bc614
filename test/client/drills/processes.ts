/**
 * Child processes for the drills: real programs on real sockets, killed with
 * SIGKILL the way a crash kills them.
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

/** A running child. */
export interface Child {
  process: ChildProcess;
  /** Everything it printed so far. */
  output(): string;
  /** Resolves with how it ended. */
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Kills it like a crash does. */
  kill9(): Promise<void>;
  /** Asks it to stop. */
  stop(): Promise<void>;
}

/** The path of a file of this repository, from this file. */
export function repoPath(relative: string): string {
  return fileURLToPath(new URL(`../../../${relative}`, import.meta.url));
}

/**
 * Runs a TypeScript file with tsx under `env`, and resolves once its output
 * matches `ready` (the match is returned), or rejects when it exits first.
 */
export async function runTs(
  file: string,
  env: Record<string, string>,
  ready: RegExp,
  timeoutMs = 60_000,
): Promise<{ child: Child; match: RegExpMatchArray }> {
  const proc = spawn(process.execPath, ['--import', 'tsx', repoPath(file)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) => {
    proc.on('exit', (code, signal) => resolve({ code, signal }));
  });
  const child: Child = {
    process: proc,
    output: () => out,
    exited,
    kill9: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGKILL');
      await exited;
    },
    stop: async () => {
      if (proc.exitCode === null && proc.signalCode === null) proc.kill('SIGTERM');
      await exited;
    },
  };
  const match = await new Promise<RegExpMatchArray>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${file} not ready in time:\n${out}`)), timeoutMs);
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const m = ready.exec(out);
      if (m) {
        clearTimeout(timer);
        resolve(m);
      }
    };
    proc.stdout?.on('data', onData);
    proc.stderr?.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`${file} exited before it was ready:\n${out}`));
    });
  });
  return { child, match };
}
