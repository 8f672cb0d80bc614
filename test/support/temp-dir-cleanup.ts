/**
 * A setup file of every test file: once the file's tests and its own hooks are
 * done (after-hooks run last-registered first, so this one runs last), the temp
 * folders it made go.
 */
import { afterAll } from 'vitest';
import { removeTempDirs } from './temp-dir.js';

afterAll(removeTempDirs);
