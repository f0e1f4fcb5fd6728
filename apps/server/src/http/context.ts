/** What the middleware learns about a request, for the handlers after it. */
import type { ApiKeyRecord } from '../store/store.js';

export type AppEnv = {
  Variables: {
    correlationId: string;
    apiKey: ApiKeyRecord;
    /** Headers for every answer to the request (answer.ts). */
    answerHeaders: Record<string, string>;
  };
};
