/** Route schema pieces shared by the route files. */
import { type Static, Type } from 'typebox';
import { Key, Problem, Scope } from '../../contract/index.js';

export const ScopeParams = Type.Object({ scope: Scope });
export type ScopeParams = Static<typeof ScopeParams>;
export const KeyParams = Type.Object({ scope: Scope, key: Key });
export type KeyParams = Static<typeof KeyParams>;

/** `{ 400: Problem, 409: Problem, ... }` for a route's response schema. */
export const problems = (...codes: number[]) => Object.fromEntries(codes.map((c) => [c, Problem]));
