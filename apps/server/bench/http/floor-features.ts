/**
 * The floor's features (floor.ts `--features=<list>`): what the server does around the contract's work by its own choice
 * or the contract's, each of which the floor can also do alone (bench:features times them, bench:instructions counts them).
 */
export const FLOOR_FEATURES = ['correlation', 'headers', 'metrics', 'usage', 'log'] as const;
