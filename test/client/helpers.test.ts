/** Pure helpers of the client: argument parsing, schemas, hashing, redaction, scrubbing, classification. */
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import { parseArguments, strictSchema, validationErrors } from '../../src/client/executor/call-args.js';
import {
  approvalRequired,
  canonicalJson,
  classify,
  inputHash,
  redactPaths,
  scrubMessage,
  ToolError,
} from '../../src/client/index.js';

describe('arguments', () => {
  it('parses JSON text, accepts objects, treats nothing as {}', () => {
    expect(parseArguments('{"a":1}')).toEqual({ ok: true, value: { a: 1 } });
    expect(parseArguments({ a: 1 })).toEqual({ ok: true, value: { a: 1 } });
    expect(parseArguments('')).toEqual({ ok: true, value: {} });
    expect(parseArguments(undefined)).toEqual({ ok: true, value: {} });
    expect(parseArguments('{"a":')).toMatchObject({ ok: false });
    expect(parseArguments({ big: 10n })).toMatchObject({ ok: false });
  });

  it('closes object schemas at every level unless they say otherwise', () => {
    const S = strictSchema(
      Type.Object({
        inner: Type.Object({ x: Type.Number() }),
        open: Type.Object({}, { additionalProperties: true }),
      }),
    );
    expect(validationErrors(S, { inner: { x: 1 }, open: { anything: 1 } })).toEqual([]);
    expect(validationErrors(S, { inner: { x: 1, y: 2 }, open: {} })).toEqual([
      '/inner/y is not a known field',
    ]);
    expect(validationErrors(S, { inner: { x: 1 }, open: {}, extra: true })).toEqual([
      '/extra is not a known field',
    ]);
  });

  it('names problems by path without quoting values', () => {
    const S = strictSchema(Type.Object({ password: Type.String({ minLength: 12 }) }));
    const errors = validationErrors(S, { password: 'hunter2' });
    expect(errors).toHaveLength(1);
    expect(errors[0]).toMatch(/^\/password /);
    expect(errors.join()).not.toContain('hunter2');
  });

  it('hashes the canonical form: key order does not matter', () => {
    expect(canonicalJson({ b: 1, a: [2, { d: 1, c: 2 }] })).toBe('{"a":[2,{"c":2,"d":1}],"b":1}');
    expect(inputHash({ b: 1, a: 2 })).toBe(inputHash({ a: 2, b: 1 }));
    expect(inputHash({ a: 1 })).toMatch(/^sha256:[0-9a-f]{64}$/);
  });
});

describe('secrets', () => {
  it('redacts dot paths in a copy, leaving absent paths alone', () => {
    const args = { card: { number: '4111', cvc: '123' }, amount: 3 };
    expect(redactPaths(args, ['card.number', 'missing.path', 'amount'])).toEqual({
      card: { number: '[REDACTED]', cvc: '123' },
      amount: '[REDACTED]',
    });
    expect(args.card.number).toBe('4111');
  });

  it('scrubs stacks, URL credentials and tokens from messages', () => {
    const text = scrubMessage(
      'connect postgres://app:hunter2@db:5432/x failed token=abc Bearer xyz.123\n    at foo (x.js:1)',
    );
    expect(text).toBe('connect postgres://[REDACTED]@db:5432/x failed token=[REDACTED] Bearer [REDACTED]');
    expect(scrubMessage('x'.repeat(600))).toHaveLength(500);
  });
});

describe('policy defaults and the classification table', () => {
  it.each([
    ['read', false],
    ['idempotent_write', false],
    ['non_idempotent_write', true],
    ['unclassified', true],
  ] as const)('%s asks for approval by default: %s', (effect, asks) => {
    expect(approvalRequired({ effect })).toBe(asks);
    expect(approvalRequired({ effect, requiresApproval: !asks })).toBe(!asks);
  });

  it('an explicit retryable: false is not retried, even for a read', () => {
    const d = classify(
      { kind: 'thrown', error: new ToolError('RATE_LIMITED', 'x', { retryable: false }) },
      'read',
    );
    expect(d.action).toBe('complete_failed');
  });

  it('a cancelled call is failed for repeatable effects and unknown for the others', () => {
    expect(classify({ kind: 'cancelled' }, 'read').action).toBe('complete_failed');
    expect(classify({ kind: 'cancelled' }, 'non_idempotent_write').action).toBe('unknown');
  });

  it('terminal codes win over notApplied', () => {
    const err = new ToolError('PERMISSION_DENIED', 'no', { notApplied: true });
    expect(classify({ kind: 'thrown', error: err }, 'unclassified').action).toBe('complete_failed');
  });
});
