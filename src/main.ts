import { statSync } from 'node:fs';
import { z } from 'zod';
import { parseCommand, UsageError, verifierKeyOf } from './cli/args.js';
import { monitor } from './cli/monitor.js';
import { isBundleArchive, verifyBundle, type BundleReport } from './cli/verify-bundle.js';
import { verifyLedgerFile } from './cli/verify-file.js';
import { ConfigError, loadConfig, type Config } from './config.js';
import { Scope, orgSlug } from './domain/schemas.js';
import { ensureError, StartError, VigilError } from './errors.js';
import { createLogger, type Logger } from './log.js';

const USAGE = `usage: vigil <command>
  serve                                              run the service (embedded mode)
  keys create --org <slug> --scopes a,b[,c] [--name n]  create an API key (creates the org if needed)
  keys list --org <slug>                             list an org's keys, a JSON line each (never a secret)
  keys revoke <key_id>                               revoke a key (refused from then on, on every node)
  orgs set-plan --org <slug> --plan <free|team|scale> [--billing-email e]  set an org's plan
  verify <ledger.jsonl>                              verify an exported ledger offline
  verify <bundle.tar.gz|dir> [--manifest-sha256 <hex>] [--key <vkey|@file>]  verify an export bundle
                                                     offline: its chain, and its records against the signed
                                                     log checkpoint it carries (--key: signed by that key,
                                                     from GET /public/log-key; --manifest-sha256: the value
                                                     from GET /exports)
  monitor <base url> <org> --key <vkey|@file> --state <file> [--follow [--interval s]]  check an org's
                                                     public checkpoints; exit 2 on a fork (monitor --help)
  help, --help, -h                                   this text (also: <command> --help)
scopes: ${Scope.join(', ')}`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
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
    case 'help':
    case '--help':
    case '-h':
      return help();
    case undefined:
      // Serving is asked for by name: a bare `vigil` beside a running server must not start another.
      console.error(USAGE);
      return 2;
    default:
      throw new UsageError(`unknown command ${command}`);
  }
}

/** The commands' output is stdout; what they log (cluster mode: a renewed KV watch) goes to stderr. */
function cliLogger(config: Config): Logger {
  return createLogger(config.logLevel, process.stderr);
}

function help(): number {
  console.log(USAGE);
  return 0;
}

async function serve(args: string[]): Promise<number> {
  if (parseCommand(args, {}, 0).values.help === true) return help();
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
  if (values.help === true) return help();
  if (positionals[0] !== 'set-plan') throw new UsageError(`orgs: ${positionals[0] === undefined ? 'name a subcommand' : `unknown subcommand ${positionals[0]}`}; use set-plan`);
  if (values.org === undefined || values.plan === undefined) throw new UsageError('orgs set-plan needs --org and --plan');
  const email = values['billing-email'];
  if (email !== undefined && !z.email().safeParse(email).success) throw new VigilError('validation_failed', `--billing-email: not an e-mail address`);
  const config = loadConfig();
  const { opened, Registry } = await openRegistry(config);
  try {
    const org = await new Registry(opened.store).setPlan(values.org, values.plan, email);
    console.log(JSON.stringify({ org: org.slug, plan: org.plan, billing_email: org.billing_email ?? null }));
  } finally {
    await opened.close();
  }
  return 0;
}

async function keys(args: string[]): Promise<number> {
  const { positionals, values } = parseCommand(args, { org: { type: 'string' }, scopes: { type: 'string' }, name: { type: 'string' } }, 2);
  if (values.help === true) return help();
  if (positionals[0] === 'revoke') return revokeKey(positionals.slice(1));
  if (positionals[0] === 'list') return listKeys(positionals.slice(1), values.org);
  if (positionals[0] !== 'create') throw new UsageError(`keys: ${positionals[0] === undefined ? 'name a subcommand' : `unknown subcommand ${positionals[0]}`}; use create, list or revoke`);
  if (positionals.length > 1) throw new UsageError(`unexpected argument ${positionals[1]}`);
  if (values.org === undefined || values.scopes === undefined) throw new UsageError('keys create needs --org and --scopes');
  const slug = orgSlug.safeParse(values.org);
  if (!slug.success) throw new VigilError('validation_failed', `--org: ${slug.error.issues[0]?.message ?? 'invalid'}`);
  const scopes = values.scopes.split(',').map((s) => s.trim());
  const bad = scopes.filter((s) => !(Scope as readonly string[]).includes(s));
  if (bad.length > 0 || scopes.length === 0) throw new VigilError('validation_failed', `--scopes: unknown scope ${bad.join(', ')}; use ${Scope.join(', ')}`);
  const config = loadConfig();
  const { opened, Registry } = await openRegistry(config);
  try {
    const registry = new Registry(opened.store);
    await registry.ensureOrg(slug.data);
    const created = await registry.createKey(slug.data, scopes as Scope[], values.name ?? null);
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
  const slug = orgSlug.safeParse(org);
  if (!slug.success) throw new VigilError('validation_failed', `--org: ${slug.error.issues[0]?.message ?? 'invalid'}`);
  const config = loadConfig();
  const { opened, Registry } = await openRegistry(config);
  try {
    // The uses a running server saw in the last minute are not written yet: last_used_at may trail by that much.
    for (const key of new Registry(opened.store).listKeys(slug.data)) console.log(JSON.stringify(key));
  } finally {
    await opened.close();
  }
  return 0;
}

async function revokeKey(ids: string[]): Promise<number> {
  if (ids.length !== 1) throw new UsageError('keys revoke needs one key id (key_…, as keys create printed it)');
  const config = loadConfig();
  const { opened, Registry } = await openRegistry(config);
  try {
    const revoked = await new Registry(opened.store).revokeKey(ids[0]!);
    console.log(JSON.stringify({ id: revoked.id, org: revoked.org, revoked_at: revoked.revoked_at }));
  } finally {
    await opened.close();
  }
  return 0;
}

/** The registry store of the data dir or the cluster (its modules loaded only for the commands that use it). */
async function openRegistry(config: Config) {
  const [{ openCliRegistry }, { Registry }] = await Promise.all([import('./cli/registry-store.js'), import('./services/registry.js')]);
  return { opened: await openCliRegistry(config, cliLogger(config)), Registry };
}

async function verify(args: string[]): Promise<number> {
  const parsed = parseCommand(args, { 'manifest-sha256': { type: 'string' }, key: { type: 'string' } }, 1);
  if (parsed.values.help === true) return help();
  const path = parsed.positionals[0];
  if (path === undefined) throw new UsageError('verify needs a ledger file or a bundle');
  const expected = parsed.values['manifest-sha256'];
  if (expected !== undefined && !/^[0-9a-fA-F]{64}$/.test(expected)) {
    console.error('--manifest-sha256: expected 64 hex characters');
    return 2;
  }
  const key = parsed.values.key === undefined ? undefined : await verifierKeyOf(parsed.values.key);
  if (isBundleArchive(path) || isDirectory(path)) {
    const report = await verifyBundle(path, { ...(expected === undefined ? {} : { expectedManifestSha256: expected }), ...(key === undefined ? {} : { key }) });
    console.log(bundleVerdict(report));
    return report.ok ? 0 : 1;
  }
  if (expected !== undefined || key !== undefined) {
    console.error(`--${expected !== undefined ? 'manifest-sha256' : 'key'} applies to a bundle (a directory, .tar.gz or .tgz)`);
    return 2;
  }
  const report = await verifyLedgerFile(path);
  console.log(JSON.stringify(report));
  if (report.ok) {
    console.log(`OK: ${report.length} records, chain intact, head ${report.head ?? '(empty)'}`);
    return 0;
  }
  console.log(`FAILED: first bad record at seq ${report.first_bad_seq}: ${report.problem}`);
  return 1;
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
      console.error(`${e.message}\n${USAGE}`);
      process.exit(2);
    }
    // What the operator can fix is said in one message; anything else is a bug and keeps its stack.
    const expected = e instanceof ConfigError || e instanceof VigilError || e instanceof StartError;
    console.error(expected ? e.message : (e.stack ?? e.message));
    process.exit(1);
  },
);
