/**
 * `pnpm bench`'s judgement of the targets (bench/http/report.ts) and its reading of bench/pipeline.ts's table
 * (bench/http/pipeline-run.ts): figures in, met or missed out, on made-up results (the benchmark itself is not run).
 */
import { describe, expect, it } from 'vitest';
import { judgeTargets, medianIndex, renderReport, type Results, type ScaleResult, type ScenarioResult } from '../bench/http/report.js';
import { parsePipelineTable, type PipelineFigures } from '../bench/http/pipeline-run.js';
import type { WrkResult } from '../bench/http/wrk.js';

const wrk = (rps: number, p99Ms = 5): WrkResult => ({ requests: rps * 10, seconds: 10, rps, p50Ms: 2, p90Ms: 3, p99Ms, maxMs: 9, statusErrors: 0, socketErrors: 0 });
const scenario = (name: string, server: number, floor: number | undefined): ScenarioResult => ({
  name,
  answerBytes: 645,
  server: wrk(server),
  ceiling: wrk(60_000),
  ...(floor === undefined ? {} : { floor: wrk(floor) }),
  rssBeforeMb: 100,
  rssAfterMb: 110,
  unexpected: 0,
});
const pipelineRow = (store: string, tasksPerSecond: number): PipelineFigures => ({
  store,
  tasksPerSecond,
  rounds: `${tasksPerSecond} / ${tasksPerSecond}`,
  submitsPerSecond: tasksPerSecond * 1.2,
  p50Ms: 5,
  p99Ms: 12,
  labels: [],
});

function results(overrides: { query?: [number, number]; submit?: [number, number]; list?: [number, number]; pipeline?: [number, number, number] } = {}): Results {
  const [query, submit, list]: [number, number][] = [overrides.query ?? [20_000, 22_000], overrides.submit ?? [10_000, 11_000], overrides.list ?? [11_000, 12_000]];
  const [sqlite, all, split] = overrides.pipeline ?? [1_000, 650, 600];
  return {
    machine: { cpu: 'test', cores: 2, ramGiB: 24, node: 'v20', wrk: 'wrk', sqlite: '3', kernel: 'test', loadBefore: 0 },
    command: 'pnpm bench',
    date: new Date('2026-11-24T00:00:00Z'),
    quick: false,
    load: { threads: 1, connections: 50, seconds: 10, warmupSeconds: 2 },
    ceilingBytes: 645,
    scenarios: [scenario('query, succeeded task', ...query!), scenario('submit', ...submit!), scenario('list, first page', ...list!)],
    scale: [],
    rss: undefined,
    pipeline: { rows: [pipelineRow('SQLite', sqlite), pipelineRow('PostgreSQL', all), pipelineRow('PostgreSQL 2 api + 2 worker', split)], description: 'test' },
    notes: [],
  };
}

const judged = (r: Results) => Object.fromEntries(judgeTargets(r, { scaleTasks: 1_000_000, rssRequests: 1_000_000 }).map((t) => [t.target, t]));

describe("pnpm bench's targets", () => {
  it('judges the PostgreSQL pipeline against SQLite’s of the same run, each topology on its own', () => {
    const met = judged(results({ pipeline: [1_000, 600, 650] }));
    expect(met["pipeline on PostgreSQL, one `all` process, ≥ 0.6 × SQLite's"]).toMatchObject({ met: true, figure: '600 / 1,000 tasks/s = 0.60 ×' });
    expect(met["pipeline on PostgreSQL, 2 `api` + 2 `worker`, ≥ 0.6 × SQLite's"]?.met).toBe(true);
    const missed = judged(results({ pipeline: [1_000, 650, 599] }));
    expect(missed["pipeline on PostgreSQL, one `all` process, ≥ 0.6 × SQLite's"]?.met).toBe(true);
    expect(missed["pipeline on PostgreSQL, 2 `api` + 2 `worker`, ≥ 0.6 × SQLite's"]).toMatchObject({ met: false, figure: '599 / 1,000 tasks/s = 0.60 ×' });
    expect(judged(results({ pipeline: [999, 650, 650] }))['pipeline on SQLite ≥ 1,000 tasks/s (submit → webhook received)']?.met).toBe(false);
  });

  it('judges each PostgreSQL topology against its floor where the run measured it: out of reach only where the floor misses the line too', () => {
    const target = "pipeline on PostgreSQL, 2 `api` + 2 `worker`, ≥ 0.6 × SQLite's";
    const withFloor = (split: number, floor: number) => {
      const r = results({ pipeline: [1_000, 650, split] });
      r.pipeline!.rows.push(pipelineRow('PostgreSQL floor, 2 api + 2 worker', floor));
      return judged(r)[target];
    };
    expect(withFloor(620, 700)).toMatchObject({ met: true, figure: '620 / 1,000 tasks/s = 0.62 ×; its floor 700 tasks/s = 0.70 ×, the server 0.89 of it' });
    expect(withFloor(620, 700)?.outOfReach).toBeUndefined();
    // Under the line with a floor over it: missed.
    expect(withFloor(540, 660)).toMatchObject({ met: false, figure: '540 / 1,000 tasks/s = 0.54 ×; its floor 660 tasks/s = 0.66 ×, the server 0.82 of it' });
    // Under the line with the floor under it too: out of reach on this machine.
    expect(withFloor(500, 590)).toMatchObject({ met: true, outOfReach: true });
    // Each topology against its own floor: the split's floor says nothing of the one-process topology.
    const r = results({ pipeline: [1_000, 550, 650] });
    r.pipeline!.rows.push(pipelineRow('PostgreSQL floor, 2 api + 2 worker', 500));
    expect(judged(r)["pipeline on PostgreSQL, one `all` process, ≥ 0.6 × SQLite's"]).toMatchObject({ met: false, figure: '550 / 1,000 tasks/s = 0.55 ×' });
    r.pipeline!.rows.push(pipelineRow('PostgreSQL floor', 580));
    expect(judged(r)["pipeline on PostgreSQL, one `all` process, ≥ 0.6 × SQLite's"]).toMatchObject({
      met: true,
      outOfReach: true,
      figure: '550 / 1,000 tasks/s = 0.55 ×; its floor 580 tasks/s = 0.58 ×, the server 0.95 of it',
    });
  });

  it('judges SQLite’s pipeline against 1,000 tasks/s, or shows it out of reach where its floor misses it too', () => {
    const target = 'pipeline on SQLite ≥ 1,000 tasks/s (submit → webhook received)';
    const withFloor = (sqlite: number, floor: number) => {
      const r = results({ pipeline: [sqlite, 650, 650] });
      r.pipeline!.rows.push(pipelineRow('SQLite floor', floor));
      return judged(r)[target];
    };
    expect(withFloor(1_200, 1_500)).toMatchObject({ met: true, figure: '1,200 tasks/s; the floor 1,500 tasks/s, the server 0.80 of it' });
    expect(withFloor(1_200, 1_500)?.outOfReach).toBeUndefined();
    // Under 1,000 with a floor that reaches it: missed.
    expect(withFloor(900, 1_100)).toMatchObject({ met: false, figure: '900 tasks/s; the floor 1,100 tasks/s, the server 0.82 of it' });
    // Under 1,000 with a floor under it too: out of reach on this machine, said as such in the report.
    const r = results({ pipeline: [575, 650, 650] });
    r.pipeline!.rows.push(pipelineRow('SQLite floor', 682));
    expect(judged(r)[target]).toMatchObject({ met: true, outOfReach: true, figure: '575 tasks/s; the floor 682 tasks/s, the server 0.84 of it' });
    const report = renderReport(r, judgeTargets(r, { scaleTasks: 1_000_000, rssRequests: 1_000_000 }));
    expect(report).toContain(`| ${target} | 575 tasks/s; the floor 682 tasks/s, the server 0.84 of it | out of reach: the floor misses it |`);
    // Without a floor in the run: the rate alone.
    expect(judged(results({ pipeline: [999, 650, 650] }))[target]).toMatchObject({ met: false, figure: '999 tasks/s' });
  });

  it('judges the GET p99 at the large store against the small one, or shows it out of reach where the floor misses it too', () => {
    const target = 'GET p99 with 1,000,000 tasks ≤ 1.2 × with 1,000';
    const size = (tasks: number, p99Ms: number, floorP99Ms?: number, readMb?: number): ScaleResult => ({
      tasks,
      seedSeconds: 1,
      get: wrk(10_000, p99Ms),
      getP99s: [p99Ms],
      getAlone: wrk(2_000, 1),
      list: wrk(5_000),
      rssMb: 120,
      ...(floorP99Ms === undefined ? {} : { floorGet: wrk(11_000, floorP99Ms), floorGetP99s: [floorP99Ms], readMb: { server: readMb ?? 0, floor: readMb ?? 0 } }),
    });
    const judge = (small: ScaleResult, large: ScaleResult) => judged({ ...results(), scale: [small, large] })[target];
    // Without the floor: the ratio alone.
    expect(judge(size(1_000, 10), size(1_000_000, 12))).toMatchObject({ met: true, figure: '12.0 ms / 10.0 ms = 1.20×; 1 connection: 1.00×' });
    expect(judge(size(1_000, 10), size(1_000_000, 12.1))?.met).toBe(false);
    // Over the line with the floor under it: missed.
    expect(judge(size(1_000, 10, 10), size(1_000_000, 13, 11, 12.25))).toMatchObject({
      met: false,
      figure: '13.0 ms / 10.0 ms = 1.30×; 1 connection: 1.00×; the floor 11.0 ms / 10.0 ms = 1.10×; read from the disk at 1,000,000 tasks: server 12.3 MB, floor 12.3 MB',
    });
    // Over the line with the floor over it too: out of reach on this machine.
    const out = judge(size(1_000, 10, 10), size(1_000_000, 14, 13, 12));
    expect(out).toMatchObject({ met: true, outOfReach: true });
    expect(out?.outOfReach).toBe(true);
    // Under the line: met, whatever the floor did.
    expect(judge(size(1_000, 10, 10), size(1_000_000, 11, 15))).toMatchObject({ met: true });
    expect(judge(size(1_000, 10, 10), size(1_000_000, 11, 15))?.outOfReach).toBeUndefined();
    // One size only: not measured.
    expect(judged({ ...results(), scale: [size(1_000, 10)] })[target]).toMatchObject({ met: undefined, figure: 'not measured' });
  });

  it('judges the query and the submit against the floor, and the list against the query', () => {
    const t = judged(results({ query: [17_000, 20_000], submit: [16_999, 20_000], list: [8_500, 4_000] }));
    expect(t["task query ≥ 0.85 × the floor's req/s"]).toMatchObject({ met: true, figure: '17,000 / 20,000 = 0.85' });
    expect(t["submit ≥ 0.85 × the floor's req/s"]?.met).toBe(false);
    // The floor's own list against its own query beside the figure.
    expect(t["list's first page ≥ 0.5 × the query's req/s"]).toMatchObject({ met: true, figure: '8,500 / 17,000 = 0.50 (floor 0.20)' });
    expect(judged(results({ query: [17_000, 20_000], list: [8_499, 4_000] }))["list's first page ≥ 0.5 × the query's req/s"]?.met).toBe(false);
  });

  it('judges a request measured in rounds on the round with the median server/floor ratio, every round beside it', () => {
    const r = results();
    r.scenarios = [
      scenario('query, succeeded task', 16_000, 20_000),
      scenario('query, succeeded task', 18_000, 20_000),
      scenario('query, succeeded task', 17_200, 20_000),
      scenario('list, first page', 9_000, 4_000),
      scenario('list, first page', 8_000, 4_000),
      scenario('list, first page', 8_700, 4_000),
    ];
    const t = judged(r);
    expect(t["task query ≥ 0.85 × the floor's req/s"]).toMatchObject({ met: true, figure: '17,200 / 20,000 = 0.86 (median of 3 rounds: 0.80, 0.90, 0.86)' });
    // The list's median round against the query's median round (by req/s).
    expect(t["list's first page ≥ 0.5 × the query's req/s"]).toMatchObject({ met: true, figure: '8,700 / 17,200 = 0.51 (floor 0.20)' });
  });

  it('says "not measured" when a part of the run was skipped, and judges nothing from it', () => {
    const r = results();
    r.pipeline = undefined;
    r.scenarios = r.scenarios.map((s) => ({ ...s, floor: undefined }));
    const t = judged(r);
    expect(t["pipeline on PostgreSQL, one `all` process, ≥ 0.6 × SQLite's"]).toMatchObject({ figure: 'not measured', met: undefined });
    expect(t["submit ≥ 0.85 × the floor's req/s"]).toMatchObject({ figure: 'not measured', met: undefined });
    // Without the floor's figures the list is judged all the same, with no floor beside it.
    expect(t["list's first page ≥ 0.5 × the query's req/s"]).toMatchObject({ met: true, figure: '11,000 / 20,000 = 0.55' });
  });

  it('shows a request measured in rounds by its median round, one row, and judges it on that round', () => {
    const rounds = [scenario('query, succeeded task', 30_000, 33_000), scenario('query, succeeded task', 24_000, 34_000), scenario('query, succeeded task', 29_000, 33_500)];
    const run = { ...results(), scenarios: [...rounds, scenario('models', 38_000, undefined)] };
    const report = renderReport(run, judgeTargets(run, { scaleTasks: 1_000_000, rssRequests: 1_000_000 }));
    const rows = report.split('\n').filter((line) => line.startsWith('| query, succeeded task |'));
    // Ratios 0.91, 0.71, 0.87: the median round is the third.
    expect(rows).toEqual([expect.stringMatching(/^\| query, succeeded task \| 29,000 \|/)]);
    expect(report).toMatch(/\| models \| 38,000 \|/);
    expect(judged(run)["task query ≥ 0.85 × the floor's req/s"]).toMatchObject({ met: true, figure: expect.stringContaining('29,000 / 33,500 = 0.87 (median of 3 rounds: 0.91, 0.71, 0.87)') });
  });

  it('reports each round and the ratio to SQLite in the pipeline table', () => {
    const report = renderReport(results({ pipeline: [1_000, 650, 600] }), []);
    expect(report).toContain('| PostgreSQL 2 api + 2 worker | 600 | 600 / 600 | 0.60 |');
  });
});

describe("reading bench/pipeline.ts's table", () => {
  const table = [
    '┌─────────┬──────────┬────────────────────────────┬──────────────────┬───────────┬───────────────────┬───────────────────┐',
    '│ (index) │ store    │ tasks/s (submit → webhook) │ tasks/s by round │ submits/s │ p50 latency @20/s │ p99 latency @20/s │',
    '├─────────┼──────────┼────────────────────────────┼──────────────────┼───────────┼───────────────────┼───────────────────┤',
    "│ 0       │ 'SQLite' │ '987'                      │ '1012 / 987 / 950' │ '1334'  │ '4.9 ms'          │ '10.8 ms'         │",
    '└─────────┴──────────┴────────────────────────────┴──────────────────┴───────────┴───────────────────┴───────────────────┘',
  ].join('\n');

  it('takes the median as the figure and keeps every round', () => {
    expect(parsePipelineTable(table)).toEqual([
      { store: 'SQLite', rounds: '1012 / 987 / 950', tasksPerSecond: 987, submitsPerSecond: 1334, p50Ms: 4.9, p99Ms: 10.8, labels: expect.any(Array) },
    ]);
  });

  it('finds the round the median came from, to show its costs beside the figure', () => {
    expect(medianIndex([597, 539, 733])).toBe(0);
    expect(medianIndex([1242, 798, 748])).toBe(1);
    expect(medianIndex([908, 1129, 1158, 935, 1065])).toBe(4);
    // An even count: the lower middle, as the figure.
    expect(medianIndex([10, 40, 20, 30])).toBe(2);
    expect(medianIndex([5])).toBe(0);
  });

  it('reads a table of one round (no rounds column)', () => {
    const one = table.replace(/│ tasks\/s by round │/, '│').replace(/│ '1012 \/ 987 \/ 950' │/, '│');
    const [row] = parsePipelineTable(one);
    expect(row).toMatchObject({ store: 'SQLite', tasksPerSecond: 987 });
    expect(row).not.toHaveProperty('rounds');
  });
});
