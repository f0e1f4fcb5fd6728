import react from '@vitejs/plugin-react';
import { defineConfig } from 'vite';

/**
 * The console is served by the server at /console (same origin as the API, so no CORS and the
 * key never leaves it). In development (`scripts/dev.mjs`) Vite's server stands in for that
 * origin: it proxies the API and the files to the Prism mock or to a real server.
 */
export default defineConfig({
  base: '/console/',
  plugins: [react()],
  build: {
    outDir: 'dist',
    emptyOutDir: true,
    // One small entry; each page is its own chunk (React.lazy routes).
    chunkSizeWarningLimit: 400,
    // No inline <script> or data: module preload helpers: the server's CSP allows 'self' only.
    assetsInlineLimit: 0,
  },
});
