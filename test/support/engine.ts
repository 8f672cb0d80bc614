import { inject } from 'vitest';
/**
 * Which database the tests run on, decided once (in the global setup):
 *   IDEM_TEST_ENGINE=pglite      -> the embedded engine, forced
 *   IDEM_TEST_ENGINE=citus       -> the Citus coordinator at IDEM_CITUS_URL (else DATABASE_URL);
 *                                   a Postgres too (`onPostgres()`), with `citus: true`
 *   DATABASE_URL                  -> that Postgres
 *   a Docker engine answers       -> a testcontainers Postgres
 *   otherwise                     -> the embedded engine, said out loud
 */
export type TestEngine =
  | {
      kind: 'postgres';
      url: string;
      source: 'DATABASE_URL' | 'testcontainers' | 'IDEM_CITUS_URL';
      /** The URL is a Citus coordinator: each test file gets a schema, not a database (see citus.ts). */
      citus?: true;
    }
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

/** The tests run on a Citus cluster (distributed tables); for skips of what Citus lacks. */
export const onCitus = () => {
  const engine = currentEngine();
  return engine.kind === 'postgres' && engine.citus === true;
};
