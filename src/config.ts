/**
 * Configuration from the environment, validated once at start. A bad value is
 * a clear message naming the variable, never a default silently taken.
 */

export interface Config {
  databaseUrl: string | undefined;
  host: string;
  port: number;
  dataDir: string;
  logLevel: string;
  db: {
    poolMax: number;
    connectTimeoutMs: number;
    statementTimeoutMs: number;
    lockTimeoutMs: number;
    idleInTransactionTimeoutMs: number;
    /** Hot-path statements as named prepared statements (off for poolers that cannot keep them). */
    prepared: boolean;
    /**
     * Statements of one kind in flight before the next ones are folded into one
     * multi-row statement (coalescing); 0 turns it off.
     */
    coalesce: number;
  };
  keysFile: string | undefined;
  sweep: { intervalMs: number; batchSize: number; purgeBatchSize: number; enabled: boolean };
  rateLimit: { perSecond: number; burst: number };
  shutdownTimeoutMs: number;
  migrateOnStart: boolean;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

type Env = Record<string, string | undefined>;

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  // One message for every way a value misses (a sign, a fraction, a word, out of range): "-1"
  // is an integer, so "must be an integer" would not say what is wrong with it.
  const n = /^\d+$/.test(raw.trim()) ? Number(raw) : Number.NaN;
  if (!(n >= min && n <= max)) {
    throw new ConfigError(`${name} must be a whole number from ${min} to ${max}, got ${JSON.stringify(raw)}`);
  }
  return n;
}

function bool(env: Env, name: string, def: boolean): boolean {
  const raw = env[name];
  if (raw === undefined || raw === '') return def;
  if (/^(1|true|yes|on)$/i.test(raw)) return true;
  if (/^(0|false|no|off)$/i.test(raw)) return false;
  throw new ConfigError(`${name} must be true or false, got ${JSON.stringify(raw)}`);
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

/** Reads and validates the configuration. Throws `ConfigError` with the variable's name. */
export function loadConfig(env: Env = process.env): Config {
  const databaseUrl = env.DATABASE_URL || undefined;
  if (databaseUrl && !/^postgres(ql)?:\/\//.test(databaseUrl)) {
    throw new ConfigError('DATABASE_URL must be a postgres:// or postgresql:// URL');
  }
  const logLevel = env.LOG_LEVEL || 'info';
  if (!LOG_LEVELS.includes(logLevel)) {
    throw new ConfigError(
      `LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(logLevel)}`,
    );
  }
  return {
    databaseUrl,
    host: env.HOST || '127.0.0.1',
    port: int(env, 'PORT', 8080, 0, 65535),
    dataDir: env.IDEM_DATA_DIR || '.idem/data',
    logLevel,
    db: {
      poolMax: int(env, 'IDEM_DB_POOL_MAX', 10, 1, 1000),
      connectTimeoutMs: int(env, 'IDEM_DB_CONNECT_TIMEOUT_MS', 2000, 100, 60_000),
      statementTimeoutMs: int(env, 'IDEM_DB_STATEMENT_TIMEOUT_MS', 5000, 100, 600_000),
      lockTimeoutMs: int(env, 'IDEM_DB_LOCK_TIMEOUT_MS', 2000, 100, 600_000),
      idleInTransactionTimeoutMs: int(env, 'IDEM_DB_IDLE_TX_TIMEOUT_MS', 10_000, 100, 600_000),
      prepared: bool(env, 'IDEM_DB_PREPARED', true),
      coalesce: int(env, 'IDEM_DB_COALESCE', 1, 0, 1000),
    },
    keysFile: env.IDEM_KEYS_FILE || undefined,
    sweep: {
      enabled: bool(env, 'IDEM_SWEEP', true),
      intervalMs: int(env, 'IDEM_SWEEP_INTERVAL_MS', 1000, 50, 3_600_000),
      batchSize: int(env, 'IDEM_SWEEP_BATCH', 500, 1, 1000),
      purgeBatchSize: int(env, 'IDEM_PURGE_BATCH', 500, 1, 1000),
    },
    rateLimit: {
      perSecond: int(env, 'IDEM_RATE_LIMIT_PER_SEC', 0, 0, 1_000_000),
      burst: int(env, 'IDEM_RATE_LIMIT_BURST', 0, 0, 10_000_000),
    },
    shutdownTimeoutMs: int(env, 'IDEM_SHUTDOWN_TIMEOUT_MS', 10_000, 0, 600_000),
    migrateOnStart: bool(env, 'IDEM_MIGRATE_ON_START', true),
  };
}
