import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts', 'src/**/*.test.ts'],
    testTimeout: 30_000,
    // The process tests run the built server (dist/main.js): built once, fresh, before any test.
    globalSetup: ['test/global-setup.ts'],
  },
});
