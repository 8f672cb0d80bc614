/**
 * The agent loop: the model proposes, the executor decides and records, the
 * model reads each record's `modelMessage`. The runtime arranges no retries of
 * its own: the executor is the only place that retries.
 */
import type { CallRecord, ToolExecutor } from '../../src/client/index.js';
import type { Message, ScriptedModel } from './scripted-model.js';

/** Called with a call that waits for a person; it should approve or reject it in the ledger. */
export type Approver = (record: CallRecord) => Promise<void>;

/** One conversation with its own id, history and call records. */
export class Session {
  readonly history: Message[] = [];
  readonly records: CallRecord[] = [];
  #turns = 0;

  constructor(
    readonly id: string,
    readonly model: ScriptedModel,
    readonly executor: ToolExecutor,
    readonly approver?: Approver,
  ) {}

  /** Adds a user message (the user, or an application note such as a reconciler's report). */
  say(text: string): void {
    this.history.push({ role: 'user', text });
  }

  /** Runs model turns until the model answers with text (or `maxTurns`). Answers that text. */
  async run(maxTurns = 8): Promise<string> {
    for (let i = 0; i < maxTurns; i++) {
      const turnId = `turn-${++this.#turns}`;
      const answer = this.model.next(this.history);
      if ('text' in answer) {
        this.history.push({ role: 'assistant', text: answer.text });
        return answer.text;
      }
      this.history.push({ role: 'assistant', toolCalls: answer.toolCalls });
      // Calls of one turn run concurrently; results go back in the order asked.
      const records = await Promise.all(
        answer.toolCalls.map(async (c) => {
          const call = { sessionId: this.id, turnId, toolCallId: c.id, name: c.name, arguments: c.arguments };
          let record = await this.executor.execute(call);
          if (record.status === 'pending_approval' && this.approver) {
            await this.approver(record);
            // The same call again: approved, it runs; rejected, it replays as rejected.
            record = await this.executor.execute(call);
          }
          return record;
        }),
      );
      for (const [i, record] of records.entries()) {
        this.records.push(record);
        this.history.push({
          role: 'tool',
          toolCallId: answer.toolCalls[i]?.id ?? '',
          text: record.modelMessage,
        });
      }
    }
    return '';
  }
}
