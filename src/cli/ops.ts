/**
 * `idem ops ...`: the operator's commands over the HTTP API, through the same
 * `LedgerClient` that agent runtimes use. The key comes from IDEM_API_KEY,
 * the service from IDEM_URL.
 */
import { LedgerClient, LedgerError } from '../client/index.js';
import type { Operation } from '../contract/index.js';
import { approveCommand, LIST_COLUMNS, listRow, shellWord } from './format.js';
import { record, table } from './table.js';

export interface OpsArgs {
  positionals: string[];
  values: Record<string, string | boolean | undefined>;
}

function summary(op: Operation): Record<string, unknown> {
  return {
    id: op.id,
    scope: op.scope,
    key: op.key,
    status: op.status,
    effect: op.effect,
    attempt: op.attempt,
    // Quoted for the shell where it must be: it pastes into --fingerprint as printed.
    fingerprint: shellWord(op.fingerprint),
    lease: op.lease,
    approval: op.approval,
    resolution: op.resolution,
    request: op.request,
    result: op.result,
    metadata: op.metadata,
    createdAt: op.createdAt,
    updatedAt: op.updatedAt,
    completedAt: op.completedAt,
    retainedUntil: op.retainedUntil,
  };
}

function need(args: OpsArgs, n: number, usage: string): string[] {
  const rest = args.positionals.slice(1);
  if (rest.length < n) throw new UsageError(`usage: idem ops ${usage}`);
  return rest;
}

export class UsageError extends Error {}

/** Runs `fn`; a ledger that cannot be reached is one line naming the URL that was tried. */
async function reaching<T>(baseUrl: string, fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof LedgerError && err.code === 'TRANSPORT' && err.status === 0) {
      throw new Error(`cannot reach the ledger at ${baseUrl}: ${err.message} (set IDEM_URL)`);
    }
    throw err;
  }
}

const str = (v: string | boolean | undefined) => (typeof v === 'string' ? v : undefined);

/** Runs one `ops` subcommand; returns what to print. */
export async function runOps(args: OpsArgs, env = process.env): Promise<string> {
  const baseUrl = env.IDEM_URL || 'http://127.0.0.1:8080';
  const client = new LedgerClient({ baseUrl, apiKey: env.IDEM_API_KEY });
  return reaching(baseUrl, () => dispatch(client, args));
}

async function dispatch(client: LedgerClient, args: OpsArgs): Promise<string> {
  const json = args.values.json === true;
  const out = (data: unknown, human: () => string) => (json ? JSON.stringify(data, null, 2) : human());
  const [sub] = args.positionals;
  const v = args.values;

  switch (sub) {
    case 'list': {
      const query = {
        ...(str(v.scope) ? { scope: str(v.scope) } : {}),
        ...(str(v.status) ? { status: str(v.status) as Operation['status'] } : {}),
        ...(str(v.effect) ? { effect: str(v.effect) as Operation['effect'] } : {}),
        ...(str(v.limit) ? { limit: Number(str(v.limit)) } : {}),
        ...(str(v.cursor) ? { cursor: str(v.cursor) } : {}),
      };
      const page = await client.list(query);
      return out(page, () => {
        const now = Date.now();
        const t = table(
          page.items.map((op) => listRow(op, now)),
          LIST_COLUMNS,
        );
        return page.nextCursor ? `${t}\n(more: --cursor ${page.nextCursor})` : t;
      });
    }
    case 'show': {
      const op = str(v.id)
        ? await client.getById(str(v.id)!)
        : await client.get(...(need(args, 2, 'show SCOPE KEY | --id ID') as [string, string]));
      return out(op, () =>
        op.status === 'pending_approval'
          ? `${record(summary(op))}\n\nto approve what is shown:\n  ${approveCommand(op)}`
          : record(summary(op)),
      );
    }
    case 'events': {
      const [scope, key] = need(args, 2, 'events SCOPE KEY');
      const events = await client.events(scope!, key!);
      return out(events, () =>
        table(events as unknown as Record<string, unknown>[], ['at', 'type', 'actor', 'attempt', 'detail']),
      );
    }
    case 'approve': {
      const [scope, key] = need(args, 2, 'approve SCOPE KEY --fingerprint F | --force [--note TEXT]');
      if (!str(v.fingerprint) && v.force !== true) {
        throw new UsageError(
          'approve needs --fingerprint (the one `idem ops show` prints, so that what you approve is what you saw), ' +
            'or --force to approve whatever request is pending',
        );
      }
      const r = await client.approve(scope!, key!, {
        ...(str(v.fingerprint) ? { fingerprint: str(v.fingerprint) } : {}),
        ...(str(v.note) ? { note: str(v.note) } : {}),
      });
      return out(r, () => `approved: ${r.operation.scope}/${r.operation.key} is ${r.operation.status}`);
    }
    case 'reject': {
      const [scope, key] = need(args, 2, 'reject SCOPE KEY [--note TEXT]');
      const r = await client.reject(scope!, key!, str(v.note) ? { note: str(v.note) } : {});
      return out(r, () => `rejected: ${r.operation.scope}/${r.operation.key} is ${r.operation.status}`);
    }
    case 'resolve': {
      const [scope, key] = need(args, 2, 'resolve SCOPE KEY --status succeeded|failed|ready --note TEXT');
      const status = str(v.status);
      const note = str(v.note);
      if (status !== 'succeeded' && status !== 'failed' && status !== 'ready') {
        throw new UsageError('--status must be succeeded, failed or ready');
      }
      if (!note) throw new UsageError('--note is required: say what you checked');
      let result: unknown;
      if (str(v.result) !== undefined) {
        try {
          result = JSON.parse(str(v.result)!);
        } catch {
          throw new UsageError('--result must be JSON');
        }
      }
      const expected = str(v['expected-attempt']);
      const r = await client.resolve(scope!, key!, {
        status,
        note,
        ...(result === undefined ? {} : { result }),
        ...(expected === undefined ? {} : { expectedAttempt: Number(expected) }),
      });
      return out(r, () => `resolved: ${r.operation.scope}/${r.operation.key} is ${r.operation.status}`);
    }
    case 'stats': {
      const s = await client.stats();
      return out(s, () =>
        table(
          s.scopes.map((x) => ({
            scope: x.scope,
            ...x.counts,
            oldestUnknownAgeMs: x.oldestOutcomeUnknownAgeMs,
          })),
          ['scope', 'pending_approval', 'ready', 'in_progress', 'outcome_unknown', 'oldestUnknownAgeMs'],
        ),
      );
    }
    default:
      throw new UsageError('usage: idem ops list|show|events|approve|reject|resolve|stats ... [--json]');
  }
}
