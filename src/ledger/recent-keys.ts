/**
 * The keys this process began lately: a hint for which shape of begin to send
 * (`sql/begin.ts`), never an answer. A key seen here most likely exists (a
 * retry, a replay), so its begin reads it first (`read_by_key`); any other
 * key most likely is new, so its begin inserts first. Both ways answer the
 * same for every key. A wrong guess costs little: a key purged since costs
 * the read before the insert, and a retry that lands on another replica is
 * answered by the insert's own conflict path.
 *
 * Bounded: the oldest key leaves when the set is full (insertion order).
 */
export class RecentKeys {
  readonly #keys = new Set<string>();

  constructor(readonly capacity: number) {}

  has(scope: string, key: string): boolean {
    return this.#keys.has(idOf(scope, key));
  }

  add(scope: string, key: string): void {
    const id = idOf(scope, key);
    if (this.#keys.has(id)) return;
    this.#keys.add(id);
    if (this.#keys.size > this.capacity) this.#keys.delete(this.#keys.values().next().value as string);
  }

  get size(): number {
    return this.#keys.size;
  }
}

/** `(scope, key)` as one string, unambiguous whatever either contains. */
const idOf = (scope: string, key: string) => `${scope.length}:${scope}${key}`;
