/** The little of s3rver (which ships no types) that the S3 fixture uses. */
declare module 's3rver' {
  import type { AddressInfo } from 'node:net';
  export default class S3rver {
    constructor(options: { address?: string; port?: number; directory: string; silent?: boolean; configureBuckets?: { name: string }[] });
    run(): Promise<AddressInfo>;
    close(): Promise<void>;
  }
}
