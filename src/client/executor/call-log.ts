/**
 * The one structured log line per call. It carries the record minus the
 * output (and minus the success text, which is the output): arguments appear
 * only as `inputHash`, and error messages were scrubbed when they were made.
 */
import type { Logger } from 'pino';
import type { CallRecord } from './call-record.js';
import { scrubMessage } from './canonical.js';

/** Extra facts for operators that the model must not see. */
export interface CallLogExtra {
  /** An exception the tool raised: logged by class and scrubbed first line only. */
  cause?: unknown;
  traceId?: string | undefined;
  sessionId: string;
}

/** Writes the call's log line: info for answers, warn for unknown outcomes. */
export function logCall(logger: Logger, record: CallRecord, extra: CallLogExtra): void {
  const { output: _output, modelMessage, ...rest } = record;
  const line: Record<string, unknown> = { call: rest, sessionId: extra.sessionId };
  if (record.status !== 'succeeded') line.modelMessage = modelMessage;
  if (extra.traceId) line.traceId = extra.traceId;
  if (extra.cause !== undefined) {
    const err = extra.cause;
    line.cause =
      err instanceof Error ? { name: err.name, message: scrubMessage(err.message) } : { name: typeof err };
  }
  const msg = `tool call ${record.tool} ${record.status}`;
  if (record.status === 'outcome_unknown') logger.warn(line, msg);
  else logger.info(line, msg);
}
