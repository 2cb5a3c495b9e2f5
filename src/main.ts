import { statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { z } from 'zod';
import { isBundleArchive, verifyBundle, type BundleReport } from './cli/verify-bundle.js';
import { verifyLedgerFile } from './cli/verify-file.js';
import { ConfigError, loadConfig } from './config.js';
import { Scope, orgSlug } from './domain/schemas.js';
import { ensureError, VigilError } from './errors.js';
import { Registry } from './registry.js';
import { startRuntime, jsonLog } from './runtime.js';
import { LmdbStore } from './store/lmdb.js';

const USAGE = `usage: vigil <command>
  serve                                              run the service (embedded mode)
  keys create --org <slug> --scopes a,b[,c] [--name n]  create an API key (creates the org if needed)
  orgs set-plan --org <slug> --plan <free|team|scale> [--billing-email e]  set an org's plan
  verify <ledger.jsonl>                              verify an exported ledger offline
  verify <bundle.tar.gz|dir> [--manifest-sha256 <hex>]  verify an export bundle offline
                                                     (optionally against the manifest sha256 from GET /exports)
scopes: ${Scope.join(', ')}`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case 'serve':
      return serve();
    case 'keys':
      return keys(rest);
    case 'orgs':
      return orgs(rest);
    case 'verify':
      return verify(rest);
    case 'help':
    case '--help':
      console.log(USAGE);
      return 0;
    default:
      console.error(`unknown command ${command}\n${USAGE}`);
      return 2;
  }
}

async function serve(): Promise<number> {
  const runtime = await startRuntime(loadConfig());
  if (runtime.firstKey !== null) {
    console.log(`\n  Vigil created org "default" with an admin key (shown only now):\n\n    ${runtime.firstKey}\n`);
  }
  const stop = (): void => {
    jsonLog('info', 'shutting down');
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
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: { org: { type: 'string' }, plan: { type: 'string' }, 'billing-email': { type: 'string' } },
  });
  if (positionals[0] !== 'set-plan' || values.org === undefined || values.plan === undefined) {
    console.error(USAGE);
    return 2;
  }
  const email = values['billing-email'];
  if (email !== undefined && !z.email().safeParse(email).success) throw new VigilError('validation_failed', `--billing-email: not an e-mail address`);
  const config = loadConfig();
  const store = new LmdbStore(config.dataDir, config.durability);
  try {
    const org = await new Registry(store).setPlan(values.org, values.plan, email);
    console.log(JSON.stringify({ org: org.slug, plan: org.plan, billing_email: org.billing_email ?? null }));
  } finally {
    await store.close();
  }
  return 0;
}

async function keys(args: string[]): Promise<number> {
  const { positionals, values } = parseArgs({
    args,
    allowPositionals: true,
    options: { org: { type: 'string' }, scopes: { type: 'string' }, name: { type: 'string' } },
  });
  if (positionals[0] !== 'create' || values.org === undefined || values.scopes === undefined) {
    console.error(USAGE);
    return 2;
  }
  const slug = orgSlug.safeParse(values.org);
  if (!slug.success) throw new VigilError('validation_failed', `--org: ${slug.error.issues[0]?.message ?? 'invalid'}`);
  const scopes = values.scopes.split(',').map((s) => s.trim());
  const bad = scopes.filter((s) => !(Scope as readonly string[]).includes(s));
  if (bad.length > 0 || scopes.length === 0) throw new VigilError('validation_failed', `--scopes: unknown scope ${bad.join(', ')}; use ${Scope.join(', ')}`);
  const config = loadConfig();
  const store = new LmdbStore(config.dataDir, config.durability);
  try {
    const registry = new Registry(store);
    await registry.ensureOrg(slug.data);
    const created = await registry.createKey(slug.data, scopes as Scope[], values.name ?? null);
    console.log(JSON.stringify({ id: created.id, org: created.org, scopes: created.scopes, name: created.name }));
    console.log(created.key);
  } finally {
    await store.close();
  }
  return 0;
}

async function verify(args: string[]): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({ args, allowPositionals: true, options: { 'manifest-sha256': { type: 'string' } } });
  } catch (error) {
    console.error(`${ensureError(error).message}\n${USAGE}`);
    return 2;
  }
  const path = parsed.positionals[0];
  if (path === undefined || parsed.positionals.length > 1) {
    console.error(USAGE);
    return 2;
  }
  const expected = parsed.values['manifest-sha256'];
  if (expected !== undefined && !/^[0-9a-fA-F]{64}$/.test(expected)) {
    console.error('--manifest-sha256: expected 64 hex characters');
    return 2;
  }
  if (isBundleArchive(path) || isDirectory(path)) {
    const report = await verifyBundle(path, expected === undefined ? {} : { expectedManifestSha256: expected });
    console.log(bundleVerdict(report));
    return report.ok ? 0 : 1;
  }
  if (expected !== undefined) {
    console.error('--manifest-sha256 applies to a bundle (a directory, .tar.gz or .tgz)');
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
  return `bundle OK: org ${report.org}, records ${range} (${report.records}), manifest sha256 ${report.manifestSha256}`;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const e = ensureError(error);
    console.error(e instanceof ConfigError || e instanceof VigilError ? e.message : (e.stack ?? e.message));
    process.exit(1);
  },
);
