export * from './operation.js';
export * from './problem.js';
