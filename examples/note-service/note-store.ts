/**
 * The note service's own durable store: one JSON line per note, fsynced, and
 * at most one note per operation key. That uniqueness is what makes saving a
 * note an idempotent write: a re-run after a crash finds the note the crashed
 * run wrote instead of writing a second one (seed 004).
 */

import { randomUUID } from 'node:crypto';
import { closeSync, existsSync, fsyncSync, mkdirSync, openSync, readFileSync, writeSync } from 'node:fs';
import { dirname } from 'node:path';

/** A saved note. */
export interface Note {
  id: string;
  operationKey: string;
  folderId: string;
  text: string;
  savedAt: string;
}

/** Notes kept in a JSON-lines file that survives restarts. */
export class NoteStore {
  readonly #file: string;
  readonly #byKey = new Map<string, Note>();
  readonly #byId = new Map<string, Note>();

  /** Loads the notes already in `file` (created on the first save). */
  constructor(file: string) {
    this.#file = file;
    mkdirSync(dirname(file), { recursive: true });
    if (existsSync(file)) {
      for (const line of readFileSync(file, 'utf8').split('\n')) {
        if (line.trim() === '') continue;
        // A torn last line (crash mid-append) was never acknowledged: skip it.
        try {
          this.#index(JSON.parse(line) as Note);
        } catch {}
      }
    }
  }

  /** The note saved under `operationKey`, saving it first if there is none. */
  saveOnce(operationKey: string, input: { folderId: string; text: string }): Note {
    const existing = this.#byKey.get(operationKey);
    if (existing) return existing;
    const note: Note = {
      id: `N-${randomUUID().slice(0, 8)}`,
      operationKey,
      folderId: input.folderId,
      text: input.text,
      savedAt: new Date().toISOString(),
    };
    const fd = openSync(this.#file, 'a');
    try {
      writeSync(fd, `${JSON.stringify(note)}\n`);
      fsyncSync(fd); // durable before anyone is told it is saved
    } finally {
      closeSync(fd);
    }
    this.#index(note);
    return note;
  }

  /** The note with this id, if any. */
  get(id: string): Note | undefined {
    return this.#byId.get(id);
  }

  /** Every note, in the order saved. */
  all(): Note[] {
    return [...this.#byId.values()];
  }

  #index(note: Note): void {
    this.#byKey.set(note.operationKey, note);
    this.#byId.set(note.id, note);
  }
}
