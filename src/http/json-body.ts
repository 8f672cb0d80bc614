/**
 * The only body parser: strict JSON. Invalid UTF-8 is refused (Node would
 * otherwise substitute U+FFFD and change what gets fingerprinted), and
 * `__proto__` / `constructor.prototype` keys are refused (prototype poisoning).
 */
import type { FastifyInstance } from 'fastify';
import sjson from 'secure-json-parse';
import { IdemError } from '../errors.js';

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

function parse(body: Buffer, done: (err: Error | null, value?: unknown) => void): void {
  let text: string;
  try {
    text = utf8.decode(body);
  } catch {
    done(new IdemError('INVALID_ARGUMENT', 'the body is not valid UTF-8'), undefined);
    return;
  }
  if (text.trim() === '') {
    done(new IdemError('INVALID_ARGUMENT', 'the body is empty'), undefined);
    return;
  }
  try {
    done(null, sjson.parse(text, undefined, { protoAction: 'error', constructorAction: 'error' }));
  } catch (err) {
    const msg = err instanceof SyntaxError ? `malformed JSON: ${err.message}` : 'forbidden key in JSON body';
    done(new IdemError('INVALID_ARGUMENT', msg), undefined);
  }
}

export function registerJsonBody(app: FastifyInstance): void {
  app.removeAllContentTypeParsers();
  // The string form matches with parameters (`; charset=utf-8`); the pattern adds `+json` types.
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_req, body, done) =>
    parse(body as Buffer, done),
  );
  app.addContentTypeParser(
    /^application\/[a-z0-9.-]+\+json(\s*;.*)?$/i,
    { parseAs: 'buffer' },
    (_req, body, done) => parse(body as Buffer, done),
  );
}
