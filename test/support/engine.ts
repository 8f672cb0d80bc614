import { inject } from 'vitest';
/**
 * Which database the tests run on, decided once (in the global setup):
 *   IDEM_TEST_ENGINE=pglite      -> the embedded engine, forced
 *   DATABASE_URL                  -> that Postgres
 *   a Docker engine answers       -> a testcontainers Postgres
 *   otherwise                     -> the embedded engine, said out loud
 */
export type TestEngine =
  | { kind: 'postgres'; url: string; source: 'DATABASE_URL' | 'testcontainers' }
  | { kind: 'pglite' };

declare module 'vitest' {
  export interface ProvidedContext {
    testEngine: TestEngine;
  }
}

/** Provided by the global setup to every test file. */
export function currentEngine(): TestEngine {
  const engine = inject('testEngine');
  if (!engine) throw new Error('the vitest global setup did not run (test/support/global-setup.ts)');
  return engine;
}

export const onPostgres = () => currentEngine().kind === 'postgres';
