/**
 * The line logged for every request (frame.ts), written as `logger.info(line, 'request')` writes it: the same
 * fields in the same order after the level, time and the logger's bindings, the same message. pino's generic
 * writer walks the object, looks each key up among the serializers and stringifiers and escapes each value on its
 * own (0.73 µs a line in a tight loop here); a line of known fields is one template (0.24 µs): a task query answers
 * in ≈ 32 µs of CPU, and this runs for every request (BENCHMARKS.md, fourteenth pass).
 *
 * It is taken only for a logger pino writes plainly, which the service's is: no mixin, hooks, `formatters.log`,
 * redaction, serializer for these fields, nested key or message prefix, `msg` as the message key, and a stream
 * that asks for no metadata. For any other logger the line goes through `logger.info`, so that what the logger's
 * options ask for still happens. With info not enabled, no line is built at all.
 */
import pino, { type Logger } from 'pino';

export interface RequestLine {
  correlationId: string;
  method: string;
  route: string;
  path: string;
  status: number;
  durationMs: number;
  accountId: string | undefined;
  keyId: string | undefined;
}

type Internals = Record<symbol, unknown>;
const FIELDS: (keyof RequestLine)[] = ['correlationId', 'method', 'route', 'path', 'status', 'durationMs', 'accountId', 'keyId'];

/** Whether pino would write `logger.info(line, 'request')` as nothing but its level, time, bindings, fields and message. */
function writesPlainly(logger: Logger): boolean {
  const own = logger as unknown as Internals;
  const { symbols } = pino;
  const hooks = own[symbols.hooksSym] as { logMethod?: unknown; streamWrite?: unknown } | undefined;
  const formatters = own[symbols.formattersSym] as { log?: unknown } | undefined;
  const serializers = (own[symbols.serializersSym] ?? {}) as Record<string, unknown>;
  const stringifiers = own[symbols.stringifiersSym] as object | undefined;
  const stream = own[symbols.streamSym] as Internals | undefined;
  return (
    !own[symbols.mixinSym] &&
    !hooks?.logMethod &&
    !hooks?.streamWrite &&
    !formatters?.log &&
    stringifiers !== undefined &&
    Reflect.ownKeys(stringifiers).length === 0 &&
    FIELDS.every((field) => serializers[field] === undefined) &&
    !own[symbols.nestedKeySym] &&
    // Not in pino's types, but among its symbols.
    own[(symbols as unknown as Record<string, symbol>).msgPrefixSym!] === undefined &&
    own[symbols.messageKeySym] === 'msg' &&
    own[symbols.endSym] === '}\n' &&
    typeof own[symbols.timeSym] === 'function' &&
    typeof (own[symbols.lsCacheSym] as Record<number, unknown> | undefined)?.[logger.levels.values.info!] === 'string' &&
    stream !== undefined &&
    stream[Symbol.for('pino.metadata')] !== true
  );
}

/** Writes a request's line through `logger`; undefined when `logger` writes no info lines. */
export function requestLogWriter(logger: Logger): ((line: RequestLine) => void) | undefined {
  if (!logger.isLevelEnabled('info')) return undefined;
  if (!writesPlainly(logger)) return (line) => logger.info({ ...line }, 'request');
  const own = logger as unknown as Internals;
  const { symbols } = pino;
  const level = (own[symbols.lsCacheSym] as Record<number, string>)[logger.levels.values.info!]!;
  const time = own[symbols.timeSym] as () => string;
  const stream = own[symbols.streamSym] as { write(line: string): void };
  // The logger's bindings as they are now (a child made later has its own logger, and so its own writer).
  const bindings = own[symbols.chindingsSym] as string;
  const text = JSON.stringify;
  // The method and route, and the account and key, as the last line had them: a loaded server's lines mostly repeat
  // them (0.2–0.4 µs a line less in a loop of a loaded turn's lines).
  let method: string | undefined;
  let route: string | undefined;
  let routeText = '';
  let accountId: string | undefined;
  let keyId: string | undefined;
  let keyText = '';
  return (line) => {
    if (line.method !== method || line.route !== route) {
      method = line.method;
      route = line.route;
      routeText = `,"method":${text(method)},"route":${text(route)}`;
    }
    if (line.accountId !== accountId || line.keyId !== keyId) {
      accountId = line.accountId;
      keyId = line.keyId;
      // pino leaves out a field whose value is undefined.
      keyText = (accountId === undefined ? '' : `,"accountId":${text(accountId)}`) + (keyId === undefined ? '' : `,"keyId":${text(keyId)}`);
    }
    // A number that is not finite pino writes as null.
    const durationMs = Number.isFinite(line.durationMs) ? line.durationMs : null;
    stream.write(
      `${level}${time()}${bindings},"correlationId":${text(line.correlationId)}${routeText},"path":${text(line.path)},"status":${line.status},"durationMs":${durationMs}${keyText},"msg":"request"}\n`,
    );
  };
}
