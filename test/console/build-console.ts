/** Browser-test global setup: builds the console as `npm run build` does, so the tests serve the real bundle. */
import { fileURLToPath } from 'node:url';
import { build } from 'vite';

export default async function setup(): Promise<void> {
  await build({ configFile: fileURLToPath(new URL('../../console.vite.config.ts', import.meta.url)) });
}
