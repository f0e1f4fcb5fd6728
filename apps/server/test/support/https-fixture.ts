/**
 * A real HTTPS server on loopback (a port from the OS) with a self-signed certificate made at
 * test time for localhost, 127.0.0.1 and ::1. Pass `ca` to whatever client should trust it.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import { createServer } from 'node:https';
import type { AddressInfo } from 'node:net';
import { generate } from 'selfsigned';

export interface HttpsFixture {
  port: number;
  /** PEM of the self-signed certificate: the fixture's only CA. */
  ca: string;
  /** TCP connections accepted so far (counted before TLS, so a refused client shows as 0). */
  readonly connections: number;
  url(path: string, host?: string): string;
  close(): Promise<void>;
}

export async function startHttpsFixture(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<HttpsFixture> {
  const pems = await generate([{ name: 'commonName', value: 'localhost' }], {
    keyType: 'ec',
    algorithm: 'sha256',
    extensions: [
      { name: 'basicConstraints', cA: true },
      {
        name: 'subjectAltName',
        altNames: [
          { type: 2, value: 'localhost' },
          { type: 7, ip: '127.0.0.1' },
          { type: 7, ip: '::1' },
        ],
      },
    ],
  });
  const server = createServer({ key: pems.private, cert: pems.cert }, handler);
  let connections = 0;
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    port,
    ca: pems.cert,
    get connections() {
      return connections;
    },
    url: (path, host = 'localhost') => `https://${host}:${port}${path}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
