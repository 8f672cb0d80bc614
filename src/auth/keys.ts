/**
 * API keys: a name, a role and scope patterns, with the secret stored only as
 * its SHA-256. Loaded from the JSON file named by IDEM_KEYS_FILE.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { SCOPE_PATTERN } from '../contract/index.js';

export type Role = 'client' | 'operator';

export interface ApiKey {
  name: string;
  role: Role;
  /** `orders`, `agent-*` (prefix), or `*`. */
  scopes: string[];
  /** Hex SHA-256 of the secret. */
  sha256: string;
}

/** Who is calling: the key's name is the actor recorded in events. */
export interface Principal {
  name: string;
  role: Role;
  scopes: string[];
}

/** With no keys configured (loopback only), every caller is this. */
export const OPEN_PRINCIPAL: Principal = { name: 'anonymous', role: 'operator', scopes: ['*'] };

const SCOPE_GLOB = new RegExp(`${SCOPE_PATTERN.slice(0, -1)}\\*?$|^\\*$`);

export function hashSecret(secret: string): string {
  return createHash('sha256').update(secret, 'utf8').digest('hex');
}

/** A new secret: 32 random bytes, url-safe, with a prefix that makes it greppable in leaks. */
export function newSecret(): string {
  return `idem_${randomBytes(32).toString('base64url')}`;
}

export function parseKeys(text: string, source: string): ApiKey[] {
  let raw: unknown;
  try {
    raw = JSON.parse(text);
  } catch {
    throw new Error(`${source}: not valid JSON`);
  }
  if (!Array.isArray(raw)) throw new Error(`${source}: must be a JSON array of keys`);
  const names = new Set<string>();
  return raw.map((k, i) => {
    const where = `${source}[${i}]`;
    if (!k || typeof k !== 'object') throw new Error(`${where}: must be an object`);
    const { name, role, scopes, sha256 } = k as Record<string, unknown>;
    if (typeof name !== 'string' || !/^[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}$/.test(name)) {
      throw new Error(`${where}.name: 1..128 characters of [A-Za-z0-9._:@-]`);
    }
    if (names.has(name)) throw new Error(`${where}.name: duplicate name ${name}`);
    names.add(name);
    if (role !== 'client' && role !== 'operator')
      throw new Error(`${where}.role: must be client or operator`);
    if (
      !Array.isArray(scopes) ||
      scopes.length === 0 ||
      !scopes.every((s) => typeof s === 'string' && SCOPE_GLOB.test(s))
    ) {
      throw new Error(`${where}.scopes: a non-empty array of scopes or patterns (orders, agent-*, *)`);
    }
    if (typeof sha256 !== 'string' || !/^[0-9a-f]{64}$/i.test(sha256)) {
      throw new Error(`${where}.sha256: the hex SHA-256 of the secret (64 hex digits)`);
    }
    return { name, role, scopes: scopes as string[], sha256: sha256.toLowerCase() };
  });
}

export function loadKeysFile(path: string): ApiKey[] {
  return parseKeys(readFileSync(path, 'utf8'), path);
}

export function scopeAllowed(patterns: readonly string[], scope: string): boolean {
  return patterns.some(
    (p) => p === '*' || p === scope || (p.endsWith('*') && scope.startsWith(p.slice(0, -1))),
  );
}

/** The keys in force; replaced whole on reload (SIGHUP). */
export class KeyStore {
  private keys: { key: ApiKey; digest: Buffer }[] = [];

  constructor(keys: ApiKey[] = []) {
    this.replace(keys);
  }

  get open(): boolean {
    return this.keys.length === 0;
  }

  get size(): number {
    return this.keys.length;
  }

  replace(keys: ApiKey[]): void {
    this.keys = keys.map((key) => ({ key, digest: Buffer.from(key.sha256, 'hex') }));
  }

  /** Compares the secret's hash with every key's in constant time; no early exit. */
  authenticate(secret: string): Principal | undefined {
    const digest = createHash('sha256').update(secret, 'utf8').digest();
    let found: ApiKey | undefined;
    for (const k of this.keys) {
      if (timingSafeEqual(digest, k.digest) && !found) found = k.key;
    }
    return found ? { name: found.name, role: found.role, scopes: found.scopes } : undefined;
  }
}
