import { statSync } from 'node:fs';
import { z } from 'zod';
import { oneLine, parseCommand, usageLine, UsageError, verifierKeyOf } from './cli/args.js';
import { monitor } from './cli/monitor.js';
import { isBundleArchive, verifyBundle, type BundleReport } from './cli/verify-bundle.js';
import { verifyLedgerFile } from './cli/verify-file.js';
import { bytes, Progress } from './cli/progress.js';
import { COMMAND_USAGE, isCommand, USAGE, type Command } from './cli/usage.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { PLANS, planNamed } from './domain/billing.js';
import { Scope, orgSlug } from './domain/schemas.js';
import { ensureError, StartError, VigilError } from './errors.js';
import { createLogger, type Logger } from './log.js';

/** The command being run, for the one-line error of a bad argument. */
let running: Command | null = null;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  if (command === undefined) {
    // Serving is asked for by name: a bare `vigil` beside a running server must not start another.
    console.error(USAGE);
    return 2;
  }
  if (command === 'help' || command === '--help' || command === '-h') return help(rest);
  if (!isCommand(command)) throw new UsageError(`unknown command ${command}`);
  running = command;
  switch (command) {
    case 'serve':
      return serve(rest);
    case 'keys':
      return keys(rest);
    case 'orgs':
      return orgs(rest);
    case 'verify':
      return verify(rest);
    case 'monitor':
      return monitor(rest);
  }
}

/** The commands' output is stdout; what they log (cluster mode: a renewed KV watch) goes to stderr. */
function cliLogger(config: Config): Logger {
  return createLogger(config.logLevel, process.stderr);
}

/** `help`: the commands; `help <command>` (or `<command> --help`): that command's usage. */
function help(args: readonly string[]): number {
  const [name, extra] = args;
  if (extra !== undefined) throw new UsageError(`unexpected argument ${extra}`);
  if (name === undefined) console.log(USAGE);
  else if (isCommand(name)) console.log(COMMAND_USAGE[name]);
  else throw new UsageError(`unknown command ${name}`);
  return 0;
}

async function serve(args: string[]): Promise<number> {
  if (parseCommand(args, {}, 0).values.help === true) return help(['serve']);
  // The first-start key goes to the terminal only, as plain text: never into a JSON log line.
  const showFirstKey = (key: string): void => console.log(`\n  Vigil created org "default" with an admin key (shown only now):\n\n    ${key}\n`);
  const config = loadConfig();
  const log = createLogger(config.logLevel);
  // The service's modules load with the command that needs them: `verify` and `monitor` start fast.
  const { startRuntime } = await import('./runtime.js');
  // VIGIL_BENCH_TRANSPARENCY=off is the bench's A/B switch (bench/macro.ts), not a setting: a server
  // without its transparency log answers 503 on the log's routes.
  const runtime = await startRuntime(config, log, { showFirstKey, transparencyLog: process.env.VIGIL_BENCH_TRANSPARENCY !== 'off' });
  const stop = (): void => {
    log.info('shutting down');
    runtime.close().then(
      () => process.exit(0),
      () => process.exit(1),
    );
  };
  process.once('SIGINT', stop);
  process.once('SIGTERM', stop);
  return new Promise<number>(() => {});
}

async function orgs(args: string[]): Promise<number> {
  const { positionals, values } = parseCommand(args, { org: { type: 'string' }, plan: { type: 'string' }, 'billing-email': { type: 'string' } }, 1);
  if (values.help === true) return help(['orgs']);
  if (positionals[0] !== 'set-plan') throw new UsageError(`orgs: ${positionals[0] === undefined ? 'name a subcommand' : `unknown subcommand ${positionals[0]}`}; use set-plan`);
  if (values.org === undefined || values.plan === undefined) throw new UsageError('orgs set-plan needs --org and --plan');
  // Checked before the store is opened: a refused command leaves a fresh data dir as it was.
  const slug = orgArg(values.org);
  const plan = values.plan;
  if (planNamed(plan) === undefined) throw new VigilError('validation_failed', `--plan: unknown plan ${JSON.stringify(plan)}; plans: ${Object.keys(PLANS).join(', ')}`);
  const email = values['billing-email'];
  if (email !== undefined && !z.email().safeParse(email).success) throw new VigilError('validation_failed', `--billing-email: not an e-mail address`);
  const config = loadConfig();
  const { opened, Registry } = await openRegistry(config);
  try {
    const { org, previousPlan } = await new Registry(opened.store).setPlan(slug, plan, email);
    console.log(JSON.stringify({ org: org.slug, plan: org.plan, billing_email: org.billing_email ?? null, previous_plan: previousPlan }));
    const billing = email === undefined ? '' : `, billing e-mail ${email}`;
    const change = previousPlan === null ? `created org ${org.slug} on plan ${org.plan}` : `org ${org.slug}: plan ${previousPlan} -> ${org.plan}${previousPlan === org.plan ? ' (unchanged)' : ''}`;
    console.log(change + billing);
  } finally {
    await opened.close();
  }
  return 0;
}

async function keys(args: string[]): Promise<number> {
  const { positionals, values } = parseCommand(args, { org: { type: 'string' }, scopes: { type: 'string' }, name: { type: 'string' } }, 2);
  if (values.help === true) return help(['keys']);
  if (positionals[0] === 'revoke') return revokeKey(positionals.slice(1));
  if (positionals[0] === 'list') return listKeys(positionals.slice(1), values.org);
  if (positionals[0] !== 'create') throw new UsageError(`keys: ${positionals[0] === undefined ? 'name a subcommand' : `unknown subcommand ${positionals[0]}`}; use create, list or revoke`);
  if (positionals.length > 1) throw new UsageError(`unexpected argument ${positionals[1]}`);
  if (values.org === undefined || values.scopes === undefined) throw new UsageError('keys create needs --org and --scopes');
  const slug = orgArg(values.org);
  const scopes = values.scopes.split(',').map((s) => s.trim());
  const bad = scopes.filter((s) => !(Scope as readonly string[]).includes(s));
  if (bad.length > 0 || scopes.length === 0) throw new VigilError('validation_failed', `--scopes: unknown scope ${bad.join(', ')}; use ${Scope.join(', ')}`);
  const config = loadConfig();
  const { opened, Registry } = await openRegistry(config);
  try {
    const registry = new Registry(opened.store);
    await registry.ensureOrg(slug);
    const created = await registry.createKey(slug, scopes as Scope[], values.name ?? null);
    console.log(JSON.stringify({ id: created.id, org: created.org, scopes: created.scopes, name: created.name }));
    console.log(created.key);
  } finally {
    await opened.close();
  }
  return 0;
}

async function listKeys(extra: string[], org: string | undefined): Promise<number> {
  if (extra.length > 0) throw new UsageError(`unexpected argument ${extra[0]}`);
  if (org === undefined) throw new UsageError('keys list needs --org');
  const slug = orgArg(org);
  const config = loadConfig();
  const { opened, Registry } = await openRegistry(config, true);
  try {
    // The uses a running server saw in the last minute are not written yet: last_used_at may trail by that much.
    for (const key of new Registry(opened.store).listKeys(slug)) console.log(JSON.stringify(key));
  } finally {
    await opened.close();
  }
  return 0;
}

async function revokeKey(ids: string[]): Promise<number> {
  if (ids.length !== 1) throw new UsageError('keys revoke needs one key id (key_…, as keys create printed it)');
  const config = loadConfig();
  const { opened, Registry } = await openRegistry(config, true);
  try {
    const revoked = await new Registry(opened.store).revokeKey(ids[0]!);
    console.log(JSON.stringify({ id: revoked.id, org: revoked.org, revoked_at: revoked.revoked_at }));
  } finally {
    await opened.close();
  }
  return 0;
}

/** The value of `--org`, a valid slug (a bad one is bad input: exit 2). */
function orgArg(value: string): string {
  const slug = orgSlug.safeParse(value);
  if (!slug.success) throw new VigilError('validation_failed', `--org: ${slug.error.issues[0]?.message ?? 'invalid'}`);
  return slug.data;
}

/**
 * The registry store of the data dir or the cluster (its modules loaded only for the commands that
 * use it); `existing`: the data dir must hold Vigil's data already (commands that create nothing).
 */
async function openRegistry(config: Config, existing = false) {
  const [{ openCliRegistry }, { Registry }] = await Promise.all([import('./cli/registry-store.js'), import('./services/registry.js')]);
  return { opened: await openCliRegistry(config, cliLogger(config), { existing }), Registry };
}

async function verify(args: string[]): Promise<number> {
  const parsed = parseCommand(args, { 'manifest-sha256': { type: 'string' }, key: { type: 'string' }, progress: { type: 'boolean' } }, 1);
  if (parsed.values.help === true) return help(['verify']);
  const path = parsed.positionals[0];
  if (path === undefined) throw new UsageError('verify needs a ledger file or a bundle');
  const expected = parsed.values['manifest-sha256'];
  if (expected !== undefined && !/^[0-9a-fA-F]{64}$/.test(expected)) throw new UsageError('--manifest-sha256: expected 64 hex characters');
  const key = parsed.values.key === undefined ? undefined : await verifierKeyOf(parsed.values.key);
  if (isBundleArchive(path) || isDirectory(path)) {
    if (parsed.values.progress === true) throw new UsageError('--progress applies to a ledger file (a bundle is checked in one step)');
    const report = await verifyBundle(path, { ...(expected === undefined ? {} : { expectedManifestSha256: expected }), ...(key === undefined ? {} : { key }) });
    console.log(bundleVerdict(report));
    return report.ok ? 0 : 1;
  }
  if (expected !== undefined || key !== undefined) {
    throw new UsageError(`--${expected !== undefined ? 'manifest-sha256' : 'key'} applies to a bundle (a directory, .tar.gz or .tgz)`);
  }
  const progress = Progress.forStderr(parsed.values.progress === true);
  const started = performance.now();
  let read = 0;
  const report = await verifyLedgerFile(path, (at) => {
    read = at.records;
    progress.update(() => `verify: ${records(at.records)}, ${bytes(at.bytesRead)} of ${bytes(at.total)} (${Math.floor((100 * at.bytesRead) / Math.max(1, at.total))}%)`);
  }).catch((error: unknown) => {
    throw unreadable(path, error);
  });
  progress.done(`verify: ${records(read)} read in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  console.log(JSON.stringify(report));
  if (report.ok) {
    console.log(`OK: ${report.length} records, chain intact, head ${report.head ?? '(empty)'}`);
    return 0;
  }
  console.log(`FAILED: first bad record at seq ${report.first_bad_seq}: ${report.problem}`);
  return 1;
}

const records = (n: number): string => `${n.toLocaleString('en')} record${n === 1 ? '' : 's'}`;

/** A file the OS would not let us read is the operator's to fix: one line (ENOENT, EACCES, EISDIR, …). */
function unreadable(path: string, error: unknown): Error {
  const code = (error as NodeJS.ErrnoException).code;
  return code === undefined ? ensureError(error) : new VigilError('not_found', `cannot read ${path}: ${code}`);
}

function isDirectory(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

function bundleVerdict(report: BundleReport): string {
  if (!report.ok) return ['bundle INVALID:', ...report.problems.map((p) => `  ${p}`)].join('\n');
  const w = report.window!;
  const range = report.records === 0 ? `none after seq ${w.since_seq}` : `${w.since_seq + 1}..${w.until_seq}`;
  const ok = `bundle OK: org ${report.org}, records ${range} (${report.records}), manifest sha256 ${report.manifestSha256}`;
  const log = report.log;
  if (log === null) return `${ok}\n  no log checkpoint (a bundle from before the transparency log): chain checked, not the log`;
  const signed = log.signed ? 'signed by the key given' : 'signature NOT checked (pass --key <vkey> from GET /public/log-key)';
  return `${ok}\n  log ${log.origin}: the window makes the checkpoint's root ${log.root} at size ${log.size}, ${signed}`;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const e = ensureError(error);
    if (e instanceof UsageError) {
      console.error(usageLine(running, e.message));
      process.exit(2);
    }
    // What the operator can fix is said in one line; anything else is a bug and keeps its stack.
    const expected = e instanceof ConfigError || e instanceof VigilError || e instanceof StartError;
    console.error(expected ? `vigil${running === null ? '' : ` ${running}`}: ${oneLine(e.message)}` : (e.stack ?? e.message));
    // A bad value of an argument (--org, --scopes, --billing-email) is bad input, as a usage error is.
    process.exit(e instanceof VigilError && e.code === 'validation_failed' ? 2 : 1);
  },
);
