/**
 * docs/executor.md promises a complete runnable example: its code is
 * examples/quickstart.ts, word for word, and that program runs against the
 * real ledger and prints what the page says.
 */
import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { type Child, repoPath, runTs } from './drills/processes.js';
import { useLedger } from './support.js';

const L = useLedger();
const children: Child[] = [];
afterAll(async () => {
  await Promise.all(children.map((c) => c.kill9()));
});

describe('docs/executor.md', () => {
  it('shows examples/quickstart.ts exactly', () => {
    const page = readFileSync(repoPath('docs/executor.md'), 'utf8');
    const file = readFileSync(repoPath('examples/quickstart.ts'), 'utf8');
    const blocks = [...page.matchAll(/```ts\n([\s\S]*?)```/g)].map((m) => m[1]);
    expect(blocks).toContain(file);
  });

  it('the quick start runs against the real ledger', { timeout: 120_000 }, async () => {
    const { child, match } = await runTs(
      'examples/quickstart.ts',
      { LEDGER_URL: L.url },
      /notes saved downstream: (\d+)/,
    );
    children.push(child);
    expect(match[1]).toBe('1');
    const out = child.output();
    expect(out).toContain('call-2 save_note: succeeded (attempts 0)');
    expect(out).toContain(
      'call-3 get_weather: failed (attempts 0) -> the tool did not run, so it is safe to call again',
    );
    expect(out).toContain('call-4 refund: pending_approval');
    expect(out).toContain('call-4 refund: succeeded -> {"refunded":30,"orderId":"1002"}');
    expect((await child.exited).code).toBe(0);
  });
});
