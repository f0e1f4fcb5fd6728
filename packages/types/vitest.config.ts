import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    // Each test runs the drift check in a child process, one of them Redocly's bundler first: 5.2 s on a slow host
    // under turbo's parallel tasks, past vitest's default 5 s.
    testTimeout: 60_000,
  },
});
