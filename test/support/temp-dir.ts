/**
 * Temp folders for tests, removed when the test file that made them is done
 * (`temp-dir-cleanup.ts`, a setup file of every test file, runs that). Service
 * processes started by tests keep their data here: an embedded cluster is some
 * 40 MB, and a suite left them behind in the system's temp folder on every run.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const made = new Set<string>();

/**
 * A temp folder of its own, removed after the test file's last hook. Make it in
 * a hook or a test, or while the file is collected only if the file is never
 * skipped: a skipped file runs no hooks, so its folder would stay.
 */
export function tempDir(prefix = 'idem-test-'): string {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  made.add(dir);
  return dir;
}

/** Removes every folder `tempDir` made in this test file. */
export function removeTempDirs(): void {
  for (const dir of made) rmSync(dir, { recursive: true, force: true, maxRetries: 3 });
  made.clear();
}
