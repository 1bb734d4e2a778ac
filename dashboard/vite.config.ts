import { fileURLToPath } from 'node:url';
import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

const here = (p: string) => fileURLToPath(new URL(p, import.meta.url));

/**
 * The dashboard is served by the server under /dashboard from `dist/`. It imports the
 * contract (and the SDK's receipt verifier, typed errors and refund typed data) from their sources, so the app is typed by the
 * same contract as the server and cannot drift from the API.
 */
export default defineConfig({
  base: '/dashboard/',
  plugins: [react()],
  resolve: {
    alias: [
      { find: /^@svc\/contract$/, replacement: here('../contract/src/index.ts') },
      { find: /^@svc\/sdk\/receipt$/, replacement: here('../sdk/src/receipt.ts') },
      { find: /^@svc\/sdk\/errors$/, replacement: here('../sdk/src/errors.ts') },
      { find: /^@svc\/sdk\/refunds$/, replacement: here('../sdk/src/refunds.ts') },
    ],
  },
  build: { outDir: 'dist', emptyOutDir: true, sourcemap: true, chunkSizeWarningLimit: 2000 },
  logLevel: 'warn',
});
