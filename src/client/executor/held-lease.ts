/**
 * The lease an acquired call holds, and every write the runner makes under
 * it: renew, and settle the operation (`complete`, `release` or `unknown`)
 * with the text the model gets for each.
 */
import { isLedgerError } from '../ledger/ledger-error.js';
import type { CallError, Outcome } from './call-record.js';
import type { CallState, RunnerDeps } from './call-state.js';
import type { Decision } from './classify.js';
import { failedMessage, succeededMessage } from './model-text.js';
import { notRun, outcomeFromOperation, unknownOutcome } from './outcome.js';
import type { Json } from './tool.js';

/** The next step when an exhausted budget ended the call: the user decides, not the model. */
export function nextAfter(error: Pick<CallError, 'code'>): 'ask_user' | 'call_again' {
  return error.code === 'BUDGET_EXHAUSTED' ? 'ask_user' : 'call_again';
}

/** A lease held on one call's operation. */
export class HeldLease {
  readonly #d: Pick<RunnerDeps, 'ledger' | 'leaseMs'>;
  readonly #c: CallState;
  readonly id: string;

  constructor(d: Pick<RunnerDeps, 'ledger' | 'leaseMs'>, c: CallState, leaseId: string) {
    this.#d = d;
    this.#c = c;
    this.id = leaseId;
  }

  /** Extends the lease; false only when it is lost (a failed heartbeat is tried again later). */
  async heartbeat(): Promise<boolean> {
    const c = this.#c;
    try {
      await this.#d.ledger.heartbeat(c.scope, c.key, this.id, this.#d.leaseMs);
      return true;
    } catch (err) {
      return !isLedgerError(err, 'LEASE_LOST');
    }
  }

  /** After the lease was lost: what the ledger says now (another worker took the call over). */
  async fromLedger(): Promise<Outcome> {
    const c = this.#c;
    try {
      return outcomeFromOperation(await this.#d.ledger.get(c.scope, c.key), c.effect);
    } catch {
      return unknownOutcome('LEASE_LOST', 'another worker took the call over');
    }
  }

  /** The tool returned a value. */
  async succeed(value: unknown): Promise<Outcome> {
    const c = this.#c;
    const output = value === undefined ? null : (value as Json);
    await this.quietly('complete', () =>
      this.#d.ledger.complete(c.scope, c.key, { leaseId: this.id, status: 'succeeded', result: output }),
    );
    return { status: 'succeeded', output, modelMessage: succeededMessage(output) };
  }

  /** Nothing ran under this lease: give it back so the call may run again. */
  release(): Promise<void> {
    const c = this.#c;
    return this.quietly('release', () => this.#d.ledger.release(c.scope, c.key, this.id));
  }

  /** Writes what the classification decided, and answers what the model is told. */
  async settle(decision: Decision): Promise<Outcome> {
    const c = this.#c;
    const { ledger } = this.#d;
    const { error } = decision;
    switch (decision.action) {
      case 'release':
        await this.release();
        return notRun(error.code, error.message, nextAfter(error));
      case 'unknown':
        await this.quietly('unknown', () => ledger.unknown(c.scope, c.key, this.id));
        return unknownOutcome(error.code, error.message);
      default:
        await this.quietly('complete', () =>
          ledger.complete(c.scope, c.key, {
            leaseId: this.id,
            status: 'failed',
            result: error as unknown as Json,
          }),
        );
        return { status: 'failed', error, modelMessage: failedMessage(error, c.effect, c.attempts) };
    }
  }

  /** A ledger write whose failure does not change the outcome. */
  async quietly(what: string, write: () => Promise<unknown>): Promise<void> {
    try {
      await write();
    } catch (err) {
      // The outcome stands; rule A settles the operation once the lease lapses.
      this.#c.logger.warn({ err: describe(err), key: this.#c.key }, `ledger ${what} failed`);
    }
  }
}

function describe(err: unknown): { name: string; code?: string } {
  if (isLedgerError(err)) return { name: err.name, code: err.code };
  return { name: err instanceof Error ? err.name : typeof err };
}
