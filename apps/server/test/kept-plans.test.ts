/**
 * Plans kept per connection (src/store/postgres/kept-plans.ts) on a real PostgreSQL: a kept statement is
 * PREPAREd once per connection and sent as EXECUTE after that, writing what its text would; one PostgreSQL
 * refuses to prepare is sent inlined, leaving an open transaction usable; a migration adding a column does
 * not break a kept plan; off, nothing is prepared; and every statement the store keeps is one PostgreSQL
 * prepares (a submission and each kind of ending, through the store).
 */
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { kept, KeptPlans, type Statement } from '../src/store/postgres/kept-plans.js';
import { PgStore, type PgJobs } from '../src/store/postgres/pg-store.js';
import { SUBMIT, testConfig, validSubmit } from './support.js';
import { backendHarness, backendKinds, type OpenedBackend } from './support/backends.js';
import { createTestDatabase, hasPostgres } from './support/postgres.js';

const literal = (value: unknown) => (value === null ? 'NULL' : typeof value === 'number' ? String(value) : pg.escapeLiteral(String(value)));
const INSERT = kept('INSERT INTO things (id, n) VALUES ($1, $2)');
/** $1 is never used: PostgreSQL cannot decide its type, so it will not prepare this. */
const UNDECIDABLE = kept('SELECT $2::int AS two');

describe.skipIf(!hasPostgres)('kept plans on PostgreSQL', () => {
  let database: { url: string; drop: () => Promise<void> };
  const clients: pg.Client[] = [];
  const connect = async () => {
    const client = new pg.Client(database.url);
    await client.connect();
    clients.push(client);
    return client;
  };
  beforeAll(async () => {
    database = await createTestDatabase();
    const client = await connect();
    await client.query('CREATE TABLE things (id text PRIMARY KEY, n int NOT NULL)');
  });
  afterAll(async () => {
    for (const client of clients) await client.end();
    await database?.drop();
  });

  /** Sends `statements` as one message, as the store does. */
  const send = async (plans: KeptPlans, client: pg.Client, statements: Statement[], inTransaction = false) => {
    await plans.prepare(client, statements, inTransaction);
    const texts = plans.texts(client, statements);
    await client.query(texts.join(';\n'));
    return texts;
  };
  const preparedOn = async (client: pg.Client) =>
    (await client.query("SELECT name, statement FROM pg_prepared_statements WHERE name LIKE 'vidgen_kept_%' ORDER BY name")).rows as { name: string; statement: string }[];

  it('prepares a kept statement once per connection and sends EXECUTE after that, writing what its text would', async () => {
    const plans = new KeptPlans(true, literal);
    const [a, b] = [await connect(), await connect()];
    // Before any PREPARE on a connection, the text goes with its values written in.
    expect(plans.texts(a, [[INSERT, ['a0', 0]]])).toEqual(["INSERT INTO things (id, n) VALUES ('a0', 0)"]);
    for (let i = 0; i < 3; i++) expect(await send(plans, a, [[INSERT, [`a${i}`, i]]])).toEqual([`EXECUTE vidgen_kept_1('a${i}', ${i})`]);
    expect(await preparedOn(a)).toEqual([{ name: 'vidgen_kept_1', statement: `PREPARE vidgen_kept_1 AS ${INSERT}` }]);
    // Another connection prepares its own, under the same name.
    expect(await preparedOn(b)).toEqual([]);
    expect(await send(plans, b, [[INSERT, ['b0', 10]], [INSERT, ['b1', 11]]])).toEqual(["EXECUTE vidgen_kept_1('b0', 10)", "EXECUTE vidgen_kept_1('b1', 11)"]);
    expect((await a.query("SELECT id, n FROM things WHERE id LIKE 'a%' OR id LIKE 'b%' ORDER BY id")).rows).toEqual([
      { id: 'a0', n: 0 },
      { id: 'a1', n: 1 },
      { id: 'a2', n: 2 },
      { id: 'b0', n: 10 },
      { id: 'b1', n: 11 },
    ]);
    // A statement not marked kept is always sent as text.
    expect(plans.texts(a, [['SELECT $1::int', [5]]])).toEqual(['SELECT 5::int']);
    expect(plans.counts()).toEqual({ kept: 1, refused: 0, named: 0 });
  });

  it('names a kept statement sent on its own, so that node-postgres prepares it once per connection; not one that is not kept', async () => {
    const plans = new KeptPlans(true, literal);
    const client = await connect();
    const named = plans.query(INSERT, ['n0', 0]);
    expect(named).toEqual({ name: 'vidgen_named_1', text: INSERT, values: ['n0', 0] });
    await client.query(named);
    await client.query(plans.query(INSERT, ['n1', 1]));
    expect((await client.query("SELECT name FROM pg_prepared_statements WHERE NOT from_sql")).rows).toEqual([{ name: 'vidgen_named_1' }]);
    expect((await client.query("SELECT count(*)::int AS n FROM things WHERE id IN ('n0', 'n1')")).rows).toEqual([{ n: 2 }]);
    expect(plans.query('SELECT $1::int', [5])).toEqual({ text: 'SELECT $1::int', values: [5] });
    expect(new KeptPlans(false, literal).query(INSERT, ['x', 1])).toEqual({ text: INSERT, values: ['x', 1] });
  });

  it('sends a statement PostgreSQL refuses to prepare with its values written in, and leaves an open transaction usable', async () => {
    const plans = new KeptPlans(true, literal);
    const client = await connect();
    await client.query('BEGIN');
    await client.query("INSERT INTO things (id, n) VALUES ('in-tx', 1)");
    expect(await send(plans, client, [[UNDECIDABLE, [1, 2]], [INSERT, ['in-tx-2', 2]]], true)).toEqual(['SELECT 2::int AS two', "EXECUTE vidgen_kept_2('in-tx-2', 2)"]);
    await client.query('COMMIT');
    expect((await client.query("SELECT id FROM things WHERE id LIKE 'in-tx%' ORDER BY id")).rows).toEqual([{ id: 'in-tx' }, { id: 'in-tx-2' }]);
    // Outside a transaction too; and it is not tried again.
    expect(await send(plans, await connect(), [[UNDECIDABLE, [1, 2]]])).toEqual(['SELECT 2::int AS two']);
    expect(plans.counts()).toEqual({ kept: 1, refused: 1, named: 0 });
  });

  it('keeps working after a migration adds a column to the table its statement writes', async () => {
    const plans = new KeptPlans(true, literal);
    const client = await connect();
    await send(plans, client, [[INSERT, ['m0', 0]]]);
    await (await connect()).query('ALTER TABLE things ADD COLUMN note text');
    expect(await send(plans, client, [[INSERT, ['m1', 1]]])).toEqual(["EXECUTE vidgen_kept_1('m1', 1)"]);
    expect((await client.query("SELECT id, note FROM things WHERE id LIKE 'm%' ORDER BY id")).rows).toEqual([
      { id: 'm0', note: null },
      { id: 'm1', note: null },
    ]);
  });

  it('prepares nothing when off (VIDGEN_DATABASE_KEEP_PLANS=false)', async () => {
    const plans = new KeptPlans(false, literal);
    const client = await connect();
    expect(await send(plans, client, [[INSERT, ['off', 7]]])).toEqual(["INSERT INTO things (id, n) VALUES ('off', 7)"]);
    expect(await preparedOn(client)).toEqual([]);
    expect(plans.counts()).toEqual({ kept: 0, refused: 0, named: 0 });
  });
});

describe.skipIf(!hasPostgres)("the store's kept statements", () => {
  let opened: OpenedBackend;
  let database: { url: string; drop: () => Promise<void> };
  beforeAll(async () => {
    opened = await backendKinds.find((kind) => kind.name === 'PostgreSQL')!.open();
    database = await createTestDatabase();
  });
  afterAll(async () => {
    await opened?.done();
    await database?.drop();
  });

  it('are all prepared by PostgreSQL: a submission, a completion with its webhook, a failure refunded, a cancel', async () => {
    const backend = await opened.fresh();
    const store = backend.store as PgStore;
    const h = backendHarness(backend, { config: testConfig() });
    const { key, accountId } = await h.account();
    const submit = async () => {
      const res = await h.request('POST', SUBMIT, { key, body: { ...validSubmit(), webhookUrl: 'https://hooks.example.com/v' } });
      expect(res.status).toBe(202);
      return ((await res.json()) as { requestId: string }).requestId;
    };
    // Each twice, so that the second goes through the kept plans on whichever connection it gets.
    for (let round = 0; round < 2; round++) {
      const [done, failed, cancelled] = [await submit(), await submit(), await submit()];
      for (const id of [done, failed]) expect((await store.startTask({ id, now: h.clock.now() })).kind).toBe('started');
      expect((await store.completeTask({ id: done, now: h.clock.now(), outputKey: `${done}.mp4`, outputUrl: 'https://files.example.com/x', outputExpiresAt: new Date(h.clock.now().getTime() + 3_600_000) })).kind).toBe('succeeded');
      expect((await store.failTask({ id: failed, now: h.clock.now(), code: 'provider_error', message: 'failed' })).kind).toBe('failed');
      expect((await store.cancelTask({ accountId, id: cancelled, now: h.clock.now() })).kind).toBe('cancelled');
    }
    const { kept: keptCount, refused, named } = store.plans.counts();
    expect(refused).toBe(0);
    // In messages: the submission's (task, job, charge) and the endings' (the task's move, delivery, its job, refund, usage).
    expect(keptCount).toBeGreaterThanOrEqual(8);
    // On their own: the start.
    expect(named).toBeGreaterThanOrEqual(1);
    // Kept plans are generic (none planned again per execution): the store's connections say so; off, they do not.
    expect((await store.pool.query('SHOW plan_cache_mode')).rows).toEqual([{ plan_cache_mode: 'force_generic_plan' }]);
    const off = new PgStore(database.url, {} as PgJobs, { keepPlans: false });
    try {
      expect((await off.pool.query('SHOW plan_cache_mode')).rows).toEqual([{ plan_cache_mode: 'auto' }]);
    } finally {
      await off.close();
    }
    expect(await store.auditBalance(accountId)).toMatchObject({ balance: expect.any(Number) });
    const audit = (await store.auditBalance(accountId))!;
    expect(audit.balance).toBe(audit.ledgerSum);
  });
});
