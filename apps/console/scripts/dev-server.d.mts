/** Types of dev-server.mjs (the console's development server, on the Prism mock or a real server). */

export const CONSOLE_DIR: string;
export const SPEC_DIR: string;
export const BUNDLE: string;
export const PRISM_BIN: string;
export const SAMPLE_VIDEO: string;
export const CLIENT_DIR: string;

/** Bundles the spec when missing or older than openapi.yaml (mock), and builds @vidgen/client when its dist/ is missing. */
export function ensureBuilt(options?: { mock?: boolean; log?: (line: string) => void }): Promise<void>;
export const MOCK_DEFAULTS: { host: string; port: number };
export const REAL_DEFAULTS: { host: string; port: number };

export class PortTakenError extends Error {
  readonly code: 'EADDRINUSE';
  constructor(host: string, port: number);
}

export function parseRange(header: string | undefined, size: number): { start: number; end: number } | undefined | null;

export interface DevServerOptions {
  /** A server's origin (real-server mode); the Prism mock when absent. */
  api?: string;
  /** Default 8080 on the mock (the examples' output.url), 5173 against a server; 0 lets the OS choose. */
  port?: number;
  /** Default `localhost` (bound as 127.0.0.1) on the mock, 127.0.0.1 against a server. */
  host?: string;
  /** true: first bundle the spec and build the client if needed (ensureBuilt); `pnpm dev` does. */
  build?: boolean;
  /** false: no file watching and no hot reload (tests); default true. */
  watch?: boolean;
  logLevel?: 'info' | 'warn' | 'error' | 'silent';
  /** Called if Prism stops on its own while the server runs. */
  onUnexpectedExit?: (error: Error) => void;
}

export interface DevServer {
  /** Where to open the console, e.g. http://localhost:8080/console/. */
  url: string;
  mode: 'mock' | 'real';
  /** Where the API calls go: Prism's origin, or the server's. */
  api: string;
  port: number;
  /** Stops Vite and Prism. */
  close(): Promise<void>;
}

export function startDevServer(options?: DevServerOptions): Promise<DevServer>;
