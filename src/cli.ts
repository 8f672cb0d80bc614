#!/usr/bin/env node
/**
 * The `idem` command: serve, migrate, keys create, and the operator's `ops`
 * commands (which talk to the HTTP API, never to the database).
 */
import { parseArgs } from 'node:util';
import { hashSecret, newSecret } from './auth/keys.js';
import { runOps, UsageError } from './cli/ops.js';
import { ConfigError, loadConfig } from './config.js';
import { openDatabase } from './db/database.js';
import { migrateDatabase } from './db/migrate.js';

const USAGE = `usage: idem <command>

  serve                          run the service (same as npm start)
  migrate                        apply database migrations and exit
  keys create --name N --role client|operator --scopes a,b-*
                                 make an API key: prints the secret once, and the line for IDEM_KEYS_FILE
  ops list [--scope S] [--status X] [--effect E] [--limit N] [--cursor C]
  ops show SCOPE KEY | --id ID
  ops events SCOPE KEY
  ops approve SCOPE KEY --fingerprint F | --force [--note TEXT]
  ops reject SCOPE KEY [--note TEXT]
  ops resolve SCOPE KEY --status succeeded|failed|ready --note TEXT [--result JSON] [--expected-attempt N]
  ops stats

ops commands read IDEM_URL (default http://127.0.0.1:8080) and IDEM_API_KEY; add --json for scripts.`;

async function main(argv: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args: argv,
    allowPositionals: true,
    options: {
      json: { type: 'boolean' },
      help: { type: 'boolean', short: 'h' },
      name: { type: 'string' },
      role: { type: 'string' },
      scopes: { type: 'string' },
      scope: { type: 'string' },
      status: { type: 'string' },
      effect: { type: 'string' },
      limit: { type: 'string' },
      cursor: { type: 'string' },
      id: { type: 'string' },
      fingerprint: { type: 'string' },
      force: { type: 'boolean' },
      note: { type: 'string' },
      result: { type: 'string' },
      'expected-attempt': { type: 'string' },
    },
  });
  const [cmd, ...rest] = positionals;
  if (values.help || !cmd) {
    console.log(USAGE);
    return values.help ? 0 : 2;
  }
  switch (cmd) {
    case 'serve': {
      const { serve } = await import('./server.js');
      await serve(loadConfig());
      return -1; // keeps running
    }
    case 'migrate': {
      const config = loadConfig();
      const db = await openDatabase(config);
      try {
        await migrateDatabase(db, config.databaseUrl);
      } finally {
        await db.close();
      }
      console.log(
        `migrations applied (${db.kind === 'pglite' ? `embedded engine in ${config.dataDir}` : 'Postgres'})`,
      );
      return 0;
    }
    case 'keys': {
      if (rest[0] !== 'create')
        throw new UsageError('usage: idem keys create --name N --role client|operator --scopes a,b');
      const role = values.role;
      if (role !== 'client' && role !== 'operator') throw new UsageError('--role must be client or operator');
      if (!values.name) throw new UsageError('--name is required');
      const scopes = (values.scopes ?? '')
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean);
      if (scopes.length === 0) throw new UsageError('--scopes is required (orders, agent-*, *)');
      const secret = newSecret();
      const entry = { name: values.name, role, scopes, sha256: hashSecret(secret) };
      // Validate exactly as the service will when it loads the file.
      const { parseKeys } = await import('./auth/keys.js');
      parseKeys(JSON.stringify([entry]), 'the new key');
      if (values.json) console.log(JSON.stringify({ secret, entry }));
      else {
        console.log(`secret (shown once, store it now): ${secret}`);
        console.log(`add to the IDEM_KEYS_FILE array, then send SIGHUP:\n${JSON.stringify(entry)}`);
      }
      return 0;
    }
    case 'ops':
      console.log(await runOps({ positionals: rest, values }));
      return 0;
    default:
      throw new UsageError(USAGE);
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    if (code >= 0) process.exitCode = code;
  },
  (err) => {
    if (
      err instanceof UsageError ||
      err instanceof ConfigError ||
      (err as { code?: string }).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION'
    ) {
      console.error(`idem: ${(err as Error).message}`);
      process.exitCode = 2;
      return;
    }
    const e = err as { code?: string; message?: string; status?: number };
    console.error(`idem: ${e.code ? `${e.code}: ` : ''}${e.message ?? String(err)}`);
    process.exitCode = 1;
  },
);
