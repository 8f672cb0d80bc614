/**
 * Saving a note safely (seed 004): the key is chosen once, before the first
 * send, and every resubmission uses it; a note in flight is waited for.
 */
import type { Note } from './note-store.js';

/** What a save came to. */
export interface SaveResult {
  status: number;
  note?: Note;
  code?: string;
  replayed: boolean;
}

/**
 * One POST /notes, following `409 OPERATION_IN_PROGRESS` (a crashed or
 * concurrent twin) up to `waits` times. A lost answer throws: the caller
 * resubmits with the same key.
 */
export async function saveNote(
  baseUrl: string,
  key: string,
  input: { folderId: string; text: string },
  waits = 10,
): Promise<SaveResult> {
  for (let i = 0; ; i++) {
    const res = await fetch(`${baseUrl}/notes`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'idempotency-key': key },
      body: JSON.stringify(input),
    });
    const body = (await res.json()) as Record<string, unknown>;
    if (res.status === 409 && body.code === 'OPERATION_IN_PROGRESS' && i < waits) {
      const seconds = Number(res.headers.get('retry-after') ?? '1');
      await new Promise((r) => setTimeout(r, Math.min(seconds, 2) * 500));
      continue;
    }
    const replayed = res.headers.get('idempotent-replayed') === 'true';
    return res.ok
      ? { status: res.status, note: body as unknown as Note, replayed }
      : { status: res.status, code: String(body.code), replayed };
  }
}
