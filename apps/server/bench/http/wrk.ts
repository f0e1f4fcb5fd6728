/**
 * wrk (the Debian package's 4.1) as the load generator: a Lua script per kind
 * of request, and a `done()` that prints the summary and the latency
 * distribution as one JSON line, which is all that is read from its output.
 */
import { execFileSync, spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { track } from './children.js';
import { cpuSecondsOf } from './cpu-cost.js';

export interface Load {
  threads: number;
  connections: number;
  seconds: number;
}

export interface WrkResult {
  requests: number;
  seconds: number;
  /** requests per second over the run */
  rps: number;
  p50Ms: number;
  p90Ms: number;
  p99Ms: number;
  maxMs: number;
  /** answers with a status ≥ 400 (wrk's own count) */
  statusErrors: number;
  /** connect, read and write errors and timeouts */
  socketErrors: number;
}

/** `wrk 4.1.0 …` or undefined when wrk is not installed. */
export function wrkVersion(): string | undefined {
  try {
    // `wrk -v` prints its banner and exits 1.
    execFileSync('wrk', ['-v'], { stdio: ['ignore', 'pipe', 'pipe'] });
  } catch (error) {
    const out = String((error as { stdout?: Buffer }).stdout ?? '');
    const match = /^wrk (\S+)/m.exec(out);
    if (match) return `wrk ${match[1]}`;
  }
  return undefined;
}

const DONE = `
function done(summary, latency, requests)
  local e = summary.errors
  io.write(string.format('\\nWRK_JSON {"requests":%.0f,"durationUs":%.0f,"p50Us":%.0f,"p90Us":%.0f,"p99Us":%.0f,"maxUs":%.0f,"connect":%.0f,"read":%.0f,"write":%.0f,"status":%.0f,"timeout":%.0f}\\n',
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90), latency:percentile(99), latency.max,
    e.connect, e.read, e.write, e.status, e.timeout))
end
`;

/** A Lua string literal (the values here are ASCII JSON, keys and paths). */
const lua = (value: string) => JSON.stringify(value);

function header(request: { method: string; headers: Record<string, string>; body?: string }): string {
  return [
    `wrk.method = ${lua(request.method)}`,
    ...(request.body === undefined ? [] : [`wrk.body = ${lua(request.body)}`]),
    ...Object.entries(request.headers).map(([name, value]) => `wrk.headers[${lua(name)}] = ${lua(value)}`),
  ].join('\n');
}

/** The submission every HTTP benchmark sends (`pnpm bench`'s submit scenario, `bench:features --request submit`). */
export const SUBMIT_BODY = JSON.stringify({ model: 'vidgen-2.0-fast', prompt: 'A paper boat drifting down a rainy street', duration: 4, resolution: '480p' });

/** The same request every time, to the URL given to wrk. */
export function writeStaticScript(path: string, request: { method: string; headers: Record<string, string>; body?: string }): string {
  writeFileSync(path, `${header(request)}\n${DONE}`);
  return path;
}

/**
 * A request per id of the file given as the script's first argument:
 * `<prefix><id><suffix>`. Thread n of t takes ids n, n+t, n+2t, … so that no
 * two requests of one run use the same id. At the end of the list it starts
 * again (`wrap`) or asks for `<prefix><exhausted><suffix>`, an id no task has,
 * which answers 404 and so shows up as an error rather than as a cheaper request.
 */
export function writeIdsScript(
  path: string,
  request: { method: string; headers: Record<string, string>; prefix: string; suffix: string; wrap: boolean; exhausted: string },
): string {
  writeFileSync(
    path,
    `${header(request)}
local ids, position, stride = {}, 1, 1
local threadsMade = 0
function setup(thread)
  thread:set("first", threadsMade)
  threadsMade = threadsMade + 1
end
function init(args)
  for line in io.lines(args[1]) do
    if #line > 0 then ids[#ids + 1] = line end
  end
  stride = tonumber(args[2])
  position = (first or 0) + 1
end
function request()
  local id = ids[position]
  if id == nil then
    if ${request.wrap ? 'true' : 'false'} and #ids > 0 then
      position = ((position - 1) % #ids) + 1
      id = ids[position]
    else
      id = ${lua(request.exhausted)}
    end
  end
  position = position + stride
  return wrk.format(nil, ${lua(request.prefix)} .. id .. ${lua(request.suffix)})
end
${DONE}`,
  );
  return path;
}

/** Runs wrk with `--latency` and the script; `scriptArgs` reach the script's init(). */
export function runWrk(url: string, script: string, load: Load, scriptArgs: string[] = []): Promise<WrkResult> {
  const args = ['-t', String(load.threads), '-c', String(load.connections), '-d', `${load.seconds}s`, '--timeout', '5s', '--latency', '-s', script, url];
  const child = track(spawn('wrk', scriptArgs.length ? [...args, '--', ...scriptArgs] : args, { stdio: ['ignore', 'pipe', 'pipe'] }));
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  return new Promise((done, fail) => {
    child.once('error', fail);
    child.once('exit', (code) => {
      const line = /^WRK_JSON (.*)$/m.exec(output);
      if (code !== 0 || !line) return fail(new Error(`wrk ${args.join(' ')} exited ${code}:\n${output}`));
      const raw = JSON.parse(line[1]!) as Record<string, number>;
      const seconds = raw.durationUs! / 1e6;
      done({
        requests: raw.requests!,
        seconds,
        rps: raw.requests! / seconds,
        p50Ms: raw.p50Us! / 1000,
        p90Ms: raw.p90Us! / 1000,
        p99Ms: raw.p99Us! / 1000,
        maxMs: raw.maxUs! / 1000,
        statusErrors: raw.status!,
        socketErrors: raw.connect! + raw.read! + raw.write! + raw.timeout!,
      });
    });
  });
}

/** `runWrk` against the process `pid`, with its CPU time an answer (µs, all its threads): steadier than req/s on a machine shared with other loads. */
export async function runWrkMeasured(pid: number, url: string, script: string, load: Load, scriptArgs: string[] = []): Promise<WrkResult & { cpuUs: number }> {
  const before = cpuSecondsOf(pid);
  const run = await runWrk(url, script, load, scriptArgs);
  return { ...run, cpuUs: ((cpuSecondsOf(pid) - before) * 1e6) / run.requests };
}
