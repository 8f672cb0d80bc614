/**
 * The environment as the service reads it (`src/config.ts`): a value it cannot
 * use is refused with the variable's name, what it accepts, and what it got;
 * the service prints that one line and exits 2 (`test/process/startup.test.ts`).
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';

const refusal = (env: Record<string, string>) => {
  try {
    loadConfig(env);
  } catch (err) {
    expect(err).toBeInstanceOf(ConfigError);
    return (err as Error).message;
  }
  throw new Error(`accepted ${JSON.stringify(env)}`);
};

describe('whole-number settings', () => {
  it.each([
    ['IDEM_DB_COALESCE', '-1', 'from 0 to 1000'],
    ['IDEM_DB_COALESCE', '1.5', 'from 0 to 1000'],
    ['IDEM_DB_COALESCE', 'on', 'from 0 to 1000'],
    ['IDEM_DB_COALESCE', '1001', 'from 0 to 1000'],
    ['PORT', 'abc', 'from 0 to 65535'],
    ['PORT', '70000', 'from 0 to 65535'],
    ['IDEM_SWEEP_BATCH', '0', 'from 1 to 1000'],
    ['IDEM_RATE_LIMIT_PER_SEC', '-5', 'from 0 to 1000000'],
  ])('%s=%s is refused: the name, the range, the value as given', (name, value, range) => {
    expect(refusal({ [name]: value })).toBe(`${name} must be a whole number ${range}, got "${value}"`);
  });

  it('a value in range is read as a number; unset or empty is the default', () => {
    expect(loadConfig({ IDEM_DB_COALESCE: '0', PORT: ' 9000 ' })).toMatchObject({
      db: { coalesce: 0 },
      port: 9000,
    });
    expect(loadConfig({ IDEM_DB_COALESCE: '' }).db.coalesce).toBe(1);
    expect(loadConfig({}).port).toBe(8080);
  });
});
