import { parseArgs } from 'node:util';
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
  verify <ledger.jsonl>                              verify an exported ledger offline
scopes: ${Scope.join(', ')}`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case undefined:
    case 'serve':
      return serve();
    case 'keys':
      return keys(rest);
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
  const file = args[0];
  if (file === undefined) {
    console.error(USAGE);
    return 2;
  }
  const report = await verifyLedgerFile(file);
  console.log(JSON.stringify(report));
  if (report.ok) {
    console.log(`OK: ${report.length} records, chain intact, head ${report.head ?? '(empty)'}`);
    return 0;
  }
  console.log(`FAILED: first bad record at seq ${report.first_bad_seq}: ${report.problem}`);
  return 1;
}

main(process.argv.slice(2)).then(
  (code) => process.exit(code),
  (error: unknown) => {
    const e = ensureError(error);
    console.error(e instanceof ConfigError || e instanceof VigilError ? e.message : (e.stack ?? e.message));
    process.exit(1);
  },
);
