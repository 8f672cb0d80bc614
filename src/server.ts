/**
 * The service process: configuration, database, migrations, sweeper, HTTP,
 * signals. `npm start` runs this.
 */
import closeWithGrace from 'close-with-grace';
import pino from 'pino';
import { KeyStore, loadKeysFile } from './auth/keys.js';
import { type Config, ConfigError, loadConfig } from './config.js';
import { openDatabase } from './db/database.js';
import { migrateDatabase } from './db/migrate.js';
import { buildApp, LOG_REDACT } from './http/app.js';
import { createMetrics } from './metrics/metrics.js';
import { scopeGaugeSource } from './ledger/sql/stats.js';
import { Sweeper } from './ledger/sweeper.js';

const LOOPBACK = /^(127\.\d+\.\d+\.\d+|::1|localhost)$/;

export async function serve(config: Config): Promise<void> {
  const log = pino({ level: config.logLevel, redact: { paths: LOG_REDACT, censor: '[redacted]' } });

  const keys = new KeyStore(config.keysFile ? loadKeysFile(config.keysFile) : []);
  if (keys.open) {
    if (!LOOPBACK.test(config.host)) {
      throw new ConfigError(
        `refusing to listen on ${config.host} without API keys: set IDEM_KEYS_FILE, or HOST=127.0.0.1`,
      );
    }
    log.warn(
      'NO API KEYS CONFIGURED: the ledger is OPEN to anyone who can reach it on loopback (set IDEM_KEYS_FILE)',
    );
  } else {
    log.info({ keys: keys.size }, 'API keys loaded');
  }

  const db = await openDatabase(config, (err) =>
    log.warn({ err: err.message }, 'idle database client failed'),
  );
  log.info(
    { engine: db.kind, dataDir: db.kind === 'pglite' ? config.dataDir : undefined },
    'database opened',
  );
  if (config.migrateOnStart) {
    await migrateDatabase(db, config.databaseUrl);
    log.info('migrations applied');
  }

  const metrics = createMetrics(db, scopeGaugeSource(db));
  const app = await buildApp({ db, keys, logger: log, metrics, rateLimit: config.rateLimit });
  const sweeper = new Sweeper(db, config.sweep, log.child({ component: 'sweeper' }), metrics);

  process.on('SIGHUP', () => {
    if (!config.keysFile) return;
    try {
      keys.replace(loadKeysFile(config.keysFile));
      log.info({ keys: keys.size }, 'API keys reloaded');
    } catch (err) {
      log.error({ err: (err as Error).message }, 'keys reload failed; keeping the previous keys');
    }
  });

  closeWithGrace({ delay: config.shutdownTimeoutMs, logger: log }, async ({ signal, err }) => {
    if (err) log.error({ err }, 'shutting down after an error');
    else log.info({ signal }, 'shutting down: no new requests, finishing in-flight ones');
    await sweeper.stop();
    await app.close();
    await db.close();
  });

  await app.listen({ host: config.host, port: config.port });
  if (config.sweep.enabled) sweeper.start();
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
    process.exit(1);
  });
}
