/**
 * The line logged for every request (frame.ts), written as `logger.info(line, 'request')` writes it: the same
 * fields in the same order after the level, time and the logger's bindings, the same message. pino's generic
 * writer walks the object, looks each key up among the serializers and stringifiers and escapes each value on its
 * own (0.73 µs a line in a tight loop here); a line of known fields is one template (0.24 µs): a task query answers
 * in ≈ 32 µs of CPU, and this runs for every request (BENCHMARKS.md, fourteenth pass). Through the service's own
 * destination (log-destination.ts) the line is not made as a string at all: its bytes go straight into the
 * destination's buffer (`bytesWriter`; fifteenth pass).
 *
 * It is taken only for a logger pino writes plainly, which the service's is: no mixin, hooks, `formatters.log`,
 * redaction, serializer for these fields, nested key or message prefix, `msg` as the message key, and a stream
 * that asks for no metadata. For any other logger the line goes through `logger.info`, so that what the logger's
 * options ask for still happens. With info not enabled, no line is built at all.
 */
import pino, { type Logger } from 'pino';
import type { LineBytesDestination } from '../log-destination.js';

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

/** Whether `stream` takes a line's bytes straight into its buffer (log-destination.ts), as the service's does. */
function takesLineBytes(stream: object): stream is LineBytesDestination {
  const out = stream as Partial<LineBytesDestination>;
  return out.bytes instanceof Uint8Array && typeof out.reserve === 'function' && typeof out.commit === 'function';
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
  const asText = textWriter(level, time, bindings, stream);
  // pino's own time (epoch milliseconds) is written as digits; any other time function's text goes the text way.
  return takesLineBytes(stream) && time === pino.stdTimeFunctions.epochTime ? bytesWriter(level, bindings, stream, asText) : asText;
}

const text = JSON.stringify;

/**
 * The line as one template, handed to the stream as a string. The method and route, and the account and key, as the
 * last line had them: a loaded server's lines mostly repeat them (0.2–0.4 µs a line less in a loop of a loaded turn's
 * lines).
 */
function textWriter(level: string, time: () => string, bindings: string, stream: { write(line: string): void }): (line: RequestLine) => void {
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
      keyText = keyFields(accountId, keyId);
    }
    stream.write(
      `${level}${time()}${bindings},"correlationId":${text(line.correlationId)}${routeText},"path":${text(line.path)},"status":${line.status},"durationMs":${duration(line.durationMs)}${keyText},"msg":"request"}\n`,
    );
  };
}

/** pino leaves out a field whose value is undefined. */
const keyFields = (accountId: string | undefined, keyId: string | undefined) =>
  (accountId === undefined ? '' : `,"accountId":${text(accountId)}`) + (keyId === undefined ? '' : `,"keyId":${text(keyId)}`);

/** A number that is not finite pino writes as null. */
const duration = (ms: number) => (Number.isFinite(ms) ? String(ms) : 'null');

/**
 * The same line's bytes put straight into the destination's buffer: what repeats from line to line kept as bytes (the
 * level, time and bindings until the millisecond changes; the method and route; the status; the account and key) and
 * copied in, the id, path and duration written in as Latin-1 once checked to be text JSON writes as itself. No string
 * is made for the line, nor encoded. An id or path with any other character (a quote, a backslash, a control
 * character, anything beyond ASCII) sends that line the text way, as does a line longer than the destination holds.
 */
function bytesWriter(level: string, bindings: string, out: LineBytesDestination, asText: (line: RequestLine) => void): (line: RequestLine) => void {
  let now = -1;
  let head = Buffer.alloc(0);
  let method: string | undefined;
  let route: string | undefined;
  let routeBytes = Buffer.alloc(0);
  let status: number | undefined;
  let statusBytes = Buffer.alloc(0);
  let accountId: string | undefined;
  let keyId: string | undefined;
  // As for a line of neither (a line with neither keeps it).
  let tail = Buffer.from(`${keyFields(accountId, keyId)},"msg":"request"}\n`);
  return (line) => {
    const { correlationId, path } = line;
    if (!PLAIN.test(correlationId) || !PLAIN.test(path)) return asText(line);
    const time = Date.now();
    if (time !== now) {
      now = time;
      head = Buffer.from(`${level},"time":${now}${bindings},"correlationId":"`);
    }
    if (line.method !== method || line.route !== route) {
      method = line.method;
      route = line.route;
      routeBytes = Buffer.from(`","method":${text(method)},"route":${text(route)},"path":"`);
    }
    if (line.status !== status) {
      status = line.status;
      statusBytes = Buffer.from(`","status":${status},"durationMs":`);
    }
    if (line.accountId !== accountId || line.keyId !== keyId) {
      accountId = line.accountId;
      keyId = line.keyId;
      tail = Buffer.from(`${keyFields(accountId, keyId)},"msg":"request"}\n`);
    }
    // A number's text is ASCII: digits, a point, a sign, an exponent, or null.
    const ms = duration(line.durationMs);
    let at = out.reserve(head.length + correlationId.length + routeBytes.length + path.length + statusBytes.length + ms.length + tail.length);
    if (at < 0) return asText(line);
    const bytes = out.bytes;
    bytes.set(head, at);
    at += head.length;
    at += bytes.write(correlationId, at, 'latin1');
    bytes.set(routeBytes, at);
    at += routeBytes.length;
    at += bytes.write(path, at, 'latin1');
    bytes.set(statusBytes, at);
    at += statusBytes.length;
    at += bytes.write(ms, at, 'latin1');
    bytes.set(tail, at);
    out.commit(at + tail.length);
  };
}

/** Text JSON writes as itself: printable ASCII but the quote and the backslash. */
const PLAIN = /^[\x20\x21\x23-\x5b\x5d-\x7e]*$/;
