/**
 * The service process: configuration, database, migrations, sweeper, HTTP,
 * signals. `npm start` runs this.
 *
 * It listens before the database is known to answer: `/healthz` and
 * `/metrics` work at once, `/readyz` and the API answer 503 until the
 * database is reachable and migrated (retried with backoff), then the
 * sweeper starts. Start-up errors that waiting cannot fix are one line
 * naming the variable, never a stack trace.
 */
import closeWithGrace from 'close-with-grace';
import pino from 'pino';
import { type ApiKey, KeyStore, loadKeysFile } from './auth/keys.js';
import { type Config, ConfigError, loadConfig } from './config.js';
import { openDatabase } from './db/database.js';
import { awaitDatabase, describeFailure } from './db/startup.js';
import { buildApp, LOG_REDACT } from './http/app.js';
import { scopeGaugeSource } from './ledger/read.js';
import { Sweeper } from './ledger/sweeper.js';
import { createMetrics } from './metrics/metrics.js';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

const FILE_ERRORS: Record<string, string> = {
  ENOENT: 'no such file',
  EISDIR: 'is a directory, not a file',
  EACCES: 'permission denied',
};

/** The keys file, or a `ConfigError` naming `IDEM_KEYS_FILE` (missing, unreadable, malformed). */
export function readKeysFile(path: string): ApiKey[] {
  try {
    return loadKeysFile(path);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    const why = code ? `cannot read ${path}: ${FILE_ERRORS[code] ?? code}` : (err as Error).message;
    throw new ConfigError(`IDEM_KEYS_FILE ${why}`);
  }
}

export async function serve(config: Config): Promise<void> {
  const log = pino({ level: config.logLevel, redact: { paths: LOG_REDACT, censor: '[redacted]' } });

  const keys = new KeyStore(config.keysFile ? readKeysFile(config.keysFile) : []);
  if (keys.open && !LOOPBACK.test(config.host)) {
    throw new ConfigError(
      `refusing to listen on ${config.host} without API keys: set IDEM_KEYS_FILE, or HOST=127.0.0.1`,
    );
  }

  // Postgres: a pool that connects on demand (nothing is known yet). The embedded
  // engine opens (and locks) its folder here: a second process stops before saying anything else.
  const db = await openDatabase(config, (err) =>
    log.warn(describeFailure(err), 'idle database client failed'),
  );
  if (keys.open) {
    log.warn(
      'NO API KEYS CONFIGURED: the ledger is OPEN to anyone who can reach it on loopback (set IDEM_KEYS_FILE)',
    );
  } else {
    log.info({ keys: keys.size }, 'API keys loaded');
  }
  const metrics = createMetrics(db, scopeGaugeSource(db));
  const app = await buildApp({ db, keys, logger: log, metrics, rateLimit: config.rateLimit });
  const sweeper = new Sweeper(db, config.sweep, log.child({ component: 'sweeper' }), metrics);
  const starting = new AbortController();
  let failedToStart = false;

  process.on('SIGHUP', () => {
    if (!config.keysFile) return;
    try {
      keys.replace(readKeysFile(config.keysFile));
      log.info({ keys: keys.size }, 'API keys reloaded');
    } catch (err) {
      log.error({ err: (err as Error).message }, 'keys reload failed; keeping the previous keys');
    }
  });

  // SIGHUP is a reload (above), not a shutdown: close-with-grace listens to it unless told not to.
  const grace = closeWithGrace(
    { delay: config.shutdownTimeoutMs, logger: log, skip: ['SIGHUP'] },
    async ({ signal, err }) => {
      if (err) log.error({ err }, 'shutting down after an error');
      else log.info({ signal }, 'shutting down: no new requests, finishing in-flight ones');
      starting.abort();
      await sweeper.stop();
      await app.close();
      await db.close();
      if (failedToStart) process.exit(1);
    },
  );

  await app.listen({ host: config.host, port: config.port });

  const ready = await awaitDatabase(db, log, {
    migrate: config.migrateOnStart,
    databaseUrl: config.databaseUrl,
    signal: starting.signal,
    ...(db.kind === 'pglite' ? { where: { dataDir: config.dataDir } } : {}),
  }).catch((err) => {
    // Waiting cannot fix it (a failing migration, a refused login): say so in one line and stop.
    const { code, reason } = describeFailure(err);
    log.fatal({ ...(code ? { code } : {}) }, `cannot start: ${reason}`);
    failedToStart = true;
    grace.close();
    return false;
  });
  if (ready && config.sweep.enabled) sweeper.start();
}

const isMain =
  process.argv[1] && import.meta.url.endsWith(process.argv[1].replace(/\\/g, '/').split('/').pop()!);
if (isMain) {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    console.error(`idem: ${(err as Error).message}`);
    process.exit(2);
  }
  serve(config).catch((err) => {
    console.error(`idem: ${err instanceof ConfigError ? err.message : (err as Error).stack}`);
    process.exit(err instanceof ConfigError ? 2 : 1);
  });
}
