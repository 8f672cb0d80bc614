/**
 * What a tool is to the executor: a name, an input schema, a policy that says
 * what kind of effect it has, and the function that runs it.
 */
import type { Logger } from 'pino';
import type { Static, TSchema } from 'typebox';
import type { Effect } from '../../contract/index.js';

/** A JSON value, as stored in the ledger. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/**
 * How the executor treats a tool. Recorded with every call: a changed policy
 * only affects later calls.
 */
export interface ToolPolicy {
  /** What running it twice does; see the effect table of the contract. */
  effect: Effect;
  /** Ask a person before running. Default: by effect (writes that are not idempotent ask). */
  requiresApproval?: boolean;
  /** Attempts and backoff for reads and idempotent writes (ignored for the others: one attempt). */
  retry?: { attempts?: number; baseMs?: number; capMs?: number };
  /**
   * Argument paths (dot-separated, e.g. `card.number`) that are secrets: they
   * never leave this process. The ledger then gets a fingerprint of the full
   * arguments and a copy with these paths replaced by `"[REDACTED]"`.
   */
  redact?: string[];
}

/** What a tool's `run` gets besides its arguments. */
export interface ToolContext {
  /** `${sessionId}/${turnId}/${toolCallId}`: the same on every attempt. Hand it to the service you write to. */
  idempotencyKey: string;
  /** Aborted on timeout, on cancellation and when the lease is lost: stop work when it fires. */
  signal: AbortSignal;
  /** 1 on the first attempt of this call. */
  attempt: number;
  sessionId: string;
  turnId: string;
  /** The id of the model's request this call answers. */
  callId: string;
  scope: string;
  /** Epoch ms after which the call's answer is no longer awaited. */
  deadline: number;
  logger: Logger;
}

/** What `probe` gets: enough to find the effect at the service. */
export interface ProbeContext {
  idempotencyKey: string;
  scope: string;
  signal: AbortSignal;
}

/** What a probe found out about a call whose outcome was unknown. */
export type ProbeResult =
  /** The effect happened. `evidence` becomes the call's stored result. */
  | { status: 'applied'; evidence?: Json; text?: string }
  /** The effect did not happen. `then` overrides the reconciler's default (`failed`). */
  | { status: 'not_applied'; then?: 'ready' | 'failed'; text?: string }
  /** Still cannot tell: the call stays `outcome_unknown`. */
  | { status: 'unknown' };

/** A tool the executor can run. */
export interface ToolDefinition<S extends TSchema = TSchema, O = unknown> {
  /** `^[A-Za-z0-9_.-]{1,64}$`, unique within an executor. */
  name: string;
  description: string;
  /**
   * TypeBox (or plain JSON Schema) of the arguments. An object schema that
   * does not say `additionalProperties` gets `false`: unknown fields are refused.
   */
  input: S;
  policy: ToolPolicy;
  /** Per attempt. Default 30 s. */
  timeoutMs?: number;
  run(args: Static<S>, ctx: ToolContext): Promise<O>;
  /** Did the effect of the call with this key and these arguments happen? */
  probe?(args: Static<S>, ctx: ProbeContext): Promise<ProbeResult>;
  /** What an approver is shown: which resource, which action, what impact. */
  preview?(args: Static<S>): Json;
}

/** Identity helper that infers `args` from the schema. */
export function defineTool<S extends TSchema, O>(tool: ToolDefinition<S, O>): ToolDefinition<S, O> {
  return tool;
}

/** Writes that are not known to be idempotent wait for a person unless the policy says otherwise. */
export function approvalRequired(policy: ToolPolicy): boolean {
  return (
    policy.requiresApproval ?? (policy.effect === 'non_idempotent_write' || policy.effect === 'unclassified')
  );
}

/** Reads and idempotent writes may run again; the others run at most once. */
export function isRepeatable(effect: Effect): boolean {
  return effect === 'read' || effect === 'idempotent_write';
}

/** The default per-attempt timeout of a tool. */
export const DEFAULT_TOOL_TIMEOUT_MS = 30_000;

/** The retry policy of the contract: 3 attempts, 200 ms base, 8 s cap. */
export const DEFAULT_TOOL_RETRY = { attempts: 3, baseMs: 200, capMs: 8000 } as const;
