#!/usr/bin/env node
/**
 * The operator command line: `pnpm vidgen <command>` from the repository root.
 * It opens the same store as the server (VIDGEN_DATA_DIR / VIDGEN_DATABASE_URL).
 * `--json` prints machine-readable output. Exit codes: 0 done, 1 not found or
 * refused, 2 usage or configuration error.
 */
import { parseArgs } from 'node:util';
import { createAccount, issueApiKey, rotateWebhookSecret } from '../accounts.js';
import { ConfigError, loadConfig, type Config } from '../config.js';
import { isScope, SCOPES, type KeyMode, type Scope } from '../domain/keys.js';
import { toTaskResource } from '../domain/task-view.js';
import { systemClock } from '../interfaces.js';
import { openBackend, type Backend } from '../store/open.js';
import pino from 'pino';
import type { Store } from '../store/store.js';
import { channelsView, upstreamTaskJson, upstreamTaskText, usageReportView } from './upstream-views.js';

const USAGE = `usage: vidgen <command> [options] [--json]

  serve [--role all|api|worker]                   run the service (all: API and worker; api or worker need PostgreSQL)
  migrate                                         apply the store's migrations and exit
  accounts create --name NAME [--credits N]       create an account (opening grant N credits)
  accounts list                                   list accounts and balances
  keys create --account ID [--scopes S,S] [--mode live|test] [--expires-in-days N] [--name NAME]
                                                  issue an API key (printed once)
  keys list --account ID                          list an account's keys (hints only)
  keys revoke KEY_ID                              revoke a key
  credits grant --account ID --amount N [--note TEXT]
                                                  add credits (a ledger entry)
  ledger --account ID                             the account's ledger and balance audit
  tasks show REQUEST_ID                           a task of any account, with its upstream part if it has one
  channels                                        the upstream channels: configuration, in flight, health, counts (never a key)
  upstream report [--from ISO] [--to ISO]         upstream usage and credits per channel and model, of tasks created
                                                  in [from, to); --to defaults to now, --from to 24 hours before --to
  webhooks list --account ID                      the account's webhook deliveries
  webhooks attempts DELIVERY_ID                   every attempt of a delivery
  webhooks redeliver DELIVERY_ID                  send a delivery again from now
  webhooks secret show --account ID               the signing secret(s) in use
  webhooks secret rotate --account ID [--overlap-hours N]
                                                  a new secret; the old one also signs for N hours (default 24)
`;

class UsageError extends Error {}
class NotFound extends Error {}

const options = {
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
  name: { type: 'string' },
  credits: { type: 'string' },
  account: { type: 'string' },
  scopes: { type: 'string' },
  mode: { type: 'string' },
  'expires-in-days': { type: 'string' },
  amount: { type: 'string' },
  note: { type: 'string' },
  'overlap-hours': { type: 'string' },
  role: { type: 'string' },
  from: { type: 'string' },
  to: { type: 'string' },
} as const;

type Values = ReturnType<typeof parseArgs<{ options: typeof options; allowPositionals: true }>>['values'];

function required(values: Values, name: keyof Values): string {
  const value = values[name];
  if (typeof value !== 'string' || value === '') throw new UsageError(`--${name} is required`);
  return value;
}

function wholeNumber(raw: string, name: string, min: number): number {
  const value = Number(raw);
  if (!Number.isSafeInteger(value) || value < min) throw new UsageError(`--${name} must be a whole number ≥ ${min}`);
  return value;
}

const iso = (date: Date | null) => (date ? date.toISOString() : null);

function instant(raw: string, name: string): Date {
  const date = new Date(raw);
  if (Number.isNaN(date.getTime())) throw new UsageError(`--${name} must be an ISO 8601 date or time, e.g. 2026-11-22T10:00:00Z`);
  return date;
}

async function run(store: Store, config: Config, positionals: string[], values: Values): Promise<{ json: unknown; text: string }> {
  const now = systemClock.now();
  const channelKeys = config.upstream.channels.map((channel) => channel.apiKey);
  const [group, action, argument] = positionals;
  const command = group === 'webhooks' && action === 'secret' ? `webhooks secret ${argument ?? ''}`.trim() : `${group ?? ''} ${action ?? ''}`.trim();

  switch (command) {
    case 'accounts create': {
      const credits = values.credits ? wholeNumber(values.credits, 'credits', 0) : 0;
      const account = await createAccount(store, { name: required(values, 'name'), credits, now });
      return { json: { ...account, createdAt: iso(account.createdAt) }, text: `created account ${account.id} (${account.name}) with ${account.balance} credits` };
    }
    case 'accounts list': {
      const accounts = await store.listAccounts();
      return {
        json: accounts.map((a) => ({ ...a, createdAt: iso(a.createdAt) })),
        text: accounts.map((a) => `${a.id}  ${a.name}  ${a.balance} credits`).join('\n') || 'no accounts',
      };
    }
    case 'keys create': {
      const accountId = required(values, 'account');
      const scopes = (values.scopes ?? 'tasks:read,tasks:write').split(',').map((s) => s.trim());
      const unknown = scopes.filter((s) => !isScope(s));
      if (unknown.length || scopes.length === 0) throw new UsageError(`--scopes must be among ${SCOPES.join(', ')}`);
      const mode = (values.mode ?? 'live') as KeyMode;
      if (mode !== 'live' && mode !== 'test') throw new UsageError('--mode must be live or test');
      const days = values['expires-in-days'] ? wholeNumber(values['expires-in-days'], 'expires-in-days', 1) : undefined;
      const expiresAt = days ? new Date(now.getTime() + days * 86_400_000) : null;
      if (!(await store.getAccount(accountId))) throw new NotFound(`no account ${accountId}`);
      const { key, record } = await issueApiKey(store, { accountId, mode, scopes: scopes as Scope[], name: values.name ?? null, expiresAt, now });
      return {
        json: { id: record.id, accountId, key, scopes: record.scopes, mode, expiresAt: iso(expiresAt) },
        text: `issued key ${record.id} for ${accountId} (${record.scopes.join(' ')}${expiresAt ? `, expires ${expiresAt.toISOString()}` : ''})\n\n    ${key}\n\nIt is shown once; only its hash is stored.`,
      };
    }
    case 'keys list': {
      const keys = await store.listApiKeys(required(values, 'account'));
      return {
        json: keys.map((k) => ({ ...k, createdAt: iso(k.createdAt), expiresAt: iso(k.expiresAt), revokedAt: iso(k.revokedAt) })),
        text:
          keys
            .map((k) => `${k.id}  ${k.hint}  ${k.scopes.join(' ')}${k.revokedAt ? '  revoked' : ''}${k.expiresAt ? `  expires ${k.expiresAt.toISOString()}` : ''}`)
            .join('\n') || 'no keys',
      };
    }
    case 'keys revoke': {
      if (!argument) throw new UsageError('keys revoke needs a KEY_ID');
      const key = await store.revokeApiKey({ id: argument, now });
      if (!key) throw new NotFound(`no key ${argument}`);
      return { json: { id: key.id, revokedAt: iso(key.revokedAt) }, text: `revoked ${key.id}` };
    }
    case 'credits grant': {
      const accountId = required(values, 'account');
      const amount = wholeNumber(required(values, 'amount'), 'amount', 1);
      const account = await store.grantCredits({ accountId, amount, note: values.note ?? null, now });
      if (!account) throw new NotFound(`no account ${accountId}`);
      return { json: { accountId, granted: amount, balance: account.balance }, text: `granted ${amount} credits to ${accountId}; balance ${account.balance}` };
    }
    case 'ledger': {
      const accountId = required(values, 'account');
      const audit = await store.auditBalance(accountId);
      if (!audit) throw new NotFound(`no account ${accountId}`);
      const entries = await store.listLedger(accountId);
      const consistent = audit.balance === audit.ledgerSum;
      return {
        json: { accountId, balance: audit.balance, ledgerSum: audit.ledgerSum, consistent, entries: entries.map((e) => ({ ...e, createdAt: iso(e.createdAt) })) },
        text: [
          ...entries.map((e) => `${e.createdAt.toISOString()}  ${e.kind.padEnd(6)}  ${String(e.amount).padStart(8)}  ${e.taskId ?? ''}  ${e.note ?? ''}`.trimEnd()),
          `balance ${audit.balance}; ledger sum ${audit.ledgerSum}${consistent ? '' : '  INCONSISTENT'}`,
        ].join('\n'),
      };
    }
    case 'tasks show': {
      if (!argument) throw new UsageError('tasks show needs a REQUEST_ID');
      const task = await store.findTask(argument);
      if (!task) throw new NotFound(`no task ${argument}`);
      const resource = { ...toTaskResource(task), accountId: task.accountId, webhookUrl: task.webhookUrl };
      const upstream = upstreamTaskJson(await store.getUpstreamTask(task.id), channelKeys);
      return { json: { ...resource, upstream }, text: `${JSON.stringify(resource, null, 2)}\n${upstreamTaskText(upstream)}` };
    }
    case 'channels':
      return channelsView(config.upstream.channels, await store.listUpstreamChannels(), now);
    case 'upstream report': {
      const to = values.to ? instant(values.to, 'to') : now;
      const from = values.from ? instant(values.from, 'from') : new Date(to.getTime() - 24 * 3600_000);
      if (from.getTime() >= to.getTime()) throw new UsageError('--from must be before --to');
      return usageReportView(await store.upstreamUsageReport({ from, to }), from, to);
    }
    case 'webhooks list': {
      const deliveries = await store.listDeliveries(required(values, 'account'), 100);
      const view = deliveries.map(({ body: _body, ...d }) => ({ ...d, lastAttemptAt: iso(d.lastAttemptAt), nextAttemptAt: iso(d.nextAttemptAt), createdAt: iso(d.createdAt) }));
      return {
        json: view,
        text: view.map((d) => `${d.id}  ${d.taskId}  ${d.eventType}  ${d.status}  attempts ${d.attempts}  ${d.url}`).join('\n') || 'no deliveries',
      };
    }
    case 'webhooks attempts': {
      if (!argument) throw new UsageError('webhooks attempts needs a DELIVERY_ID');
      if (!(await store.getDelivery(argument))) throw new NotFound(`no delivery ${argument}`);
      const attempts = (await store.listDeliveryAttempts(argument)).map((a) => ({ ...a, attemptedAt: iso(a.attemptedAt) }));
      return {
        json: attempts,
        text: attempts.map((a) => `${a.attemptedAt}  ${a.statusCode ?? '-'}  ${a.durationMs} ms  ${a.error ?? ''}`.trimEnd()).join('\n') || 'no attempts yet',
      };
    }
    case 'webhooks redeliver': {
      if (!argument) throw new UsageError('webhooks redeliver needs a DELIVERY_ID');
      const delivery = await store.redeliver({ deliveryId: argument, now });
      if (!delivery) throw new NotFound(`no delivery ${argument}`);
      return { json: { id: delivery.id, status: delivery.status }, text: `${delivery.id} will be sent again (a running server picks it up within seconds)` };
    }
    case 'webhooks secret show': {
      const accountId = required(values, 'account');
      const secrets = await store.webhookSecrets(accountId, now);
      if (secrets.length === 0) throw new NotFound(`no account ${accountId}`);
      return { json: { accountId, secrets }, text: secrets.join('\n') };
    }
    case 'webhooks secret rotate': {
      const accountId = required(values, 'account');
      const overlapHours = values['overlap-hours'] ? wholeNumber(values['overlap-hours'], 'overlap-hours', 0) : 24;
      const rotated = await rotateWebhookSecret(store, { accountId, overlapHours, now });
      if (!rotated) throw new NotFound(`no account ${accountId}`);
      const { secret, previousSecretValidUntil: previousValidUntil } = rotated;
      return {
        json: { accountId, secret, previousValidUntil: iso(previousValidUntil) },
        text: `new secret for ${accountId}:\n\n    ${secret}\n\n${previousValidUntil ? `The previous one also signs until ${previousValidUntil.toISOString()}.` : 'The previous one no longer signs.'}`,
      };
    }
    default:
      throw new UsageError(command ? `unknown command: ${command}` : 'a command is required');
  }
}

async function main(argv: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args: argv, options, allowPositionals: true, strict: true });
  } catch (error) {
    process.stderr.write(`vidgen: ${(error as Error).message}\n\n${USAGE}`);
    return 2;
  }
  if (parsed.values.help || parsed.positionals.length === 0) {
    process.stdout.write(USAGE);
    return parsed.values.help ? 0 : 2;
  }
  if (parsed.positionals[0] === 'serve') {
    // The server reads --role from the command line itself, and runs until a signal.
    await import('../main.js');
    return 0;
  }
  let backend: Backend | undefined;
  try {
    const config = loadConfig();
    backend = await openBackend(config, { logger: pino({ level: 'silent' }), listen: false, supervise: false });
    const result =
      parsed.positionals[0] === 'migrate' ? { json: { migrated: true }, text: 'migrations applied' } : await run(backend.store, config, parsed.positionals, parsed.values);
    process.stdout.write(`${parsed.values.json ? JSON.stringify(result.json, null, 2) : result.text}\n`);
    return 0;
  } catch (error) {
    if (error instanceof UsageError || error instanceof ConfigError) {
      process.stderr.write(`vidgen: ${error.message}\n\n${error instanceof UsageError ? USAGE : ''}`);
      return 2;
    }
    if (error instanceof NotFound) {
      process.stderr.write(`vidgen: ${error.message}\n`);
      return 1;
    }
    throw error;
  } finally {
    await backend?.close();
  }
}

const code = await main(process.argv.slice(2));
if (process.argv[2] !== 'serve') process.exitCode = code;
