/**
 * Builds the operator console (src/console/web) into dist/console-web, which
 * the service serves at /console/ (src/console/plugin.ts). Hashed file names,
 * no inline script or style, so the strict CSP holds.
 */
import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';

export default defineConfig({
  root: fileURLToPath(new URL('src/console/web', import.meta.url)),
  base: '/console/',
  publicDir: false,
  logLevel: 'warn',
  build: {
    outDir: fileURLToPath(new URL('dist/console-web', import.meta.url)),
    emptyOutDir: true,
    target: 'es2022',
    // No inlined assets (data: URLs for fonts or images) and no preload polyfill.
    assetsInlineLimit: 0,
    modulePreload: false,
    sourcemap: false,
  },
});
