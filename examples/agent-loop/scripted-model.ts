/**
 * A stand-in for a language model: a script of turns. Each turn reads the
 * conversation so far and answers tool calls or a final text, the way a chat
 * API would. It lets the agent loop run without any model service.
 */

/** One message of the conversation. */
export type Message =
  | { role: 'user'; text: string }
  | { role: 'assistant'; text?: string; toolCalls?: ModelToolCall[] }
  | { role: 'tool'; toolCallId: string; text: string };

/** A tool call as a model proposes it: arguments as JSON text. */
export interface ModelToolCall {
  id: string;
  name: string;
  arguments: string;
}

/** What the model answers for a turn. */
export type ModelTurn = { toolCalls: ModelToolCall[] } | { text: string };

/** A scripted "model": turn n answers with `script[n](history)`. */
export class ScriptedModel {
  #turn = 0;
  constructor(readonly script: ((history: Message[]) => ModelTurn)[]) {}

  /** The next turn's answer; a final text once the script is over. */
  next(history: Message[]): ModelTurn {
    const step = this.script[this.#turn++];
    return step ? step(history) : { text: 'Done.' };
  }
}

/** The text of the last tool result, for scripts that react to it. */
export function lastToolResult(history: Message[]): string {
  for (let i = history.length - 1; i >= 0; i--) {
    const m = history[i];
    if (m?.role === 'tool') return m.text;
  }
  return '';
}
