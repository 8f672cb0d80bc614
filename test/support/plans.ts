/**
 * The generic plan of a statement (what a named prepared statement runs
 * after its first calls) and how it reads `idem_operations`: PREPARE, then
 * EXPLAIN EXECUTE with every parameter NULL under `plan_cache_mode =
 * force_generic_plan`. All of it must run in one session.
 */

/** Runs one text in the session the plan is taken in. */
export type SessionQuery = (text: string) => Promise<Record<string, unknown>[]>;

interface PlanNode {
  'Node Type': string;
  'Relation Name'?: string;
  'Index Name'?: string;
  Plans?: PlanNode[];
}

/**
 * The index each read of `idem_operations` in the generic plan goes through
 * (a bitmap scan counts as its index's), or the node type of a read that uses
 * none ("Seq Scan").
 */
export async function genericPlanReads(query: SessionQuery, text: string, params: number): Promise<string[]> {
  await query('SET plan_cache_mode = force_generic_plan');
  await query(`PREPARE plan_probe AS ${text}`);
  try {
    const args = params ? `(${Array(params).fill('NULL').join(', ')})` : '';
    const [row] = await query(`EXPLAIN (FORMAT JSON) EXECUTE plan_probe${args}`);
    const raw = row!['QUERY PLAN'] as [{ Plan: PlanNode }] | string;
    const doc = typeof raw === 'string' ? (JSON.parse(raw) as [{ Plan: PlanNode }]) : raw;
    return reads(doc[0].Plan);
  } finally {
    await query('DEALLOCATE plan_probe');
  }
}

function reads(node: PlanNode, out: string[] = []): string[] {
  const type = node['Node Type'];
  if (node['Relation Name'] === 'idem_operations' && type !== 'ModifyTable') {
    if (type === 'Bitmap Heap Scan') out.push(...bitmapIndexes(node));
    else out.push(node['Index Name'] ?? type);
  }
  for (const child of node.Plans ?? []) if (type !== 'Bitmap Heap Scan') reads(child, out);
  return out;
}

function bitmapIndexes(node: PlanNode): string[] {
  if (node['Node Type'] === 'Bitmap Index Scan') return [node['Index Name'] ?? '?'];
  return (node.Plans ?? []).flatMap(bitmapIndexes);
}
