/**
 * The generated types of the vidgen API (openapi-typescript, from the bundled spec).
 *
 * In the workspace this re-exports `@vidgen/types`; the build replaces the emitted
 * `dist/openapi.d.ts` with the generated declarations themselves, so the published package
 * carries its types and needs no `@vidgen/types` (see scripts/build.mjs).
 */
export type { components, operations, paths, webhooks } from '@vidgen/types';
