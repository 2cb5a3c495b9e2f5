import { execFileSync, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { call, listeningPort, removeDir, ROOT, runCli, serverEnv, startServer, STACK_LINE, tempDir } from '../support/server.js';

/** Runs `run` over `items`, three at a time (each is a Node process; the machine is shared). */
async function inTurns<T, R>(items: readonly T[], run: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i += 3) results.push(...(await Promise.all(items.slice(i, i + 3).map(run))));
  return results;
}

describe('CLI usage', () => {
  it('prints the commands for help, and each command\'s own usage for <command> --help and help <command>, exit 0', async () => {
    const dir = tempDir();
    try {
      const cases: [string[], string][] = [
        [['help'], 'usage: vigil <command>'],
        [['--help'], 'usage: vigil <command>'],
        [['-h'], 'usage: vigil <command>'],
        [['serve', '--help'], 'usage: vigil serve'],
        [['keys', '--help'], 'usage: vigil keys <create|list|revoke>'],
        [['keys', 'create', '--help'], 'usage: vigil keys <create|list|revoke>'],
        [['help', 'keys'], 'usage: vigil keys <create|list|revoke>'],
        [['orgs', '--help'], 'usage: vigil orgs set-plan'],
        [['orgs', 'set-plan', '-h'], 'usage: vigil orgs set-plan'],
        [['verify', '--help'], 'usage: vigil verify <ledger.jsonl>'],
        [['help', 'verify'], 'usage: vigil verify <ledger.jsonl>'],
        [['monitor', '--help'], 'usage: vigil monitor <base url>'],
        [['help', 'monitor'], 'usage: vigil monitor <base url>'],
      ];
      const runs = await inTurns(cases, ([args]) => runCli(args, { VIGIL_DATA_DIR: dir, VIGIL_PORT: '0' }));
      runs.forEach((run, i) => {
        const [args, first] = cases[i]!;
        const what = args.join(' ');
        expect(run.timedOut, what).toBe(false);
        expect(run.code, what).toBe(0);
        expect(run.stdout.split('\n')[0], what).toContain(first);
        expect(run.stderr, what).not.toMatch(STACK_LINE);
      });
      // The command list names every command; each usage says what its exit statuses mean.
      for (const command of ['serve', 'keys', 'orgs', 'verify', 'monitor', 'help']) expect(runs[0]!.stdout).toMatch(new RegExp(`^  ${command} `, 'm'));
      runs.slice(3).forEach((run, i) => expect(run.stdout, cases[i + 3]![0].join(' ')).toMatch(/^exit status: /m));
    } finally {
      removeDir(dir);
    }
  });

  it('answers bad arguments with one line naming the problem and where the usage is, exit 2, no stack trace, nothing changed', async () => {
    const dir = tempDir();
    try {
      const cases: [string[], string][] = [
        [['keys', 'create', '--org', 'a', '--scopes', 'admin', '--bogus'], "vigil keys: Unknown option '--bogus' (see vigil keys --help)"],
        [['keys', 'create', '--org'], "vigil keys: Option '--org <value>' argument missing (see vigil keys --help)"],
        [['keys', 'create', '--scopes', 'admin'], 'vigil keys: keys create needs --org and --scopes (see vigil keys --help)'],
        [['keys', 'create', '--org', 'Not A Slug', '--scopes', 'admin'], 'vigil keys: --org: org slug is 1-64 lowercase letters, digits or inner hyphens'],
        [['keys', 'create', '--org', 'a', '--scopes', 'admin,root'], 'vigil keys: --scopes: unknown scope root; use events:write, review, admin, audit:read'],
        [['keys'], 'vigil keys: keys: name a subcommand; use create, list or revoke (see vigil keys --help)'],
        [['keys', 'delete'], 'vigil keys: keys: unknown subcommand delete; use create, list or revoke (see vigil keys --help)'],
        [['keys', 'revoke'], 'vigil keys: keys revoke needs one key id (key_…, as keys create printed it) (see vigil keys --help)'],
        [['orgs', 'set-plan', '--org', 'a', '--plan', 'team', '--nope'], "vigil orgs: Unknown option '--nope' (see vigil orgs --help)"],
        [['orgs', 'set-plan', '--org', 'a'], 'vigil orgs: orgs set-plan needs --org and --plan (see vigil orgs --help)'],
        [['orgs', 'set-plan', '--org', 'a', '--plan', 'team', '--billing-email', 'nope'], 'vigil orgs: --billing-email: not an e-mail address'],
        [['orgs', 'set-plan', '--org', 'Not A Slug', '--plan', 'team'], 'vigil orgs: --org: org slug is 1-64 lowercase letters, digits or inner hyphens'],
        [['orgs', 'set-plan', '--org', 'a', '--plan', 'gold'], 'vigil orgs: --plan: unknown plan "gold"; plans: free, team, scale'],
        [['verify', '--what', 'x.jsonl'], "vigil verify: Unknown option '--what' (see vigil verify --help)"],
        [['verify'], 'vigil verify: verify needs a ledger file or a bundle (see vigil verify --help)'],
        [['verify', 'a.jsonl', 'b.jsonl'], 'vigil verify: unexpected argument b.jsonl (see vigil verify --help)'],
        [['verify', 'a.jsonl', '--manifest-sha256', 'zz'], 'vigil verify: --manifest-sha256: expected 64 hex characters (see vigil verify --help)'],
        [['serve', '--port', '1'], "vigil serve: Unknown option '--port' (see vigil serve --help)"],
        [['serve', 'now'], 'vigil serve: unexpected argument now (see vigil serve --help)'],
        [['frobnicate'], 'vigil: unknown command frobnicate (see vigil help)'],
        [['help', 'frobnicate'], 'vigil: unknown command frobnicate (see vigil help)'],
      ];
      const runs = await inTurns(cases, ([args]) => runCli(args, { VIGIL_DATA_DIR: dir, VIGIL_PORT: '0' }));
      runs.forEach((run, i) => {
        const [args, line] = cases[i]!;
        const what = args.join(' ');
        expect(run.timedOut, what).toBe(false);
        expect(run.code, what).toBe(2);
        expect(run.stderr, what).toBe(`${line}\n`);
        expect(run.stdout, what).toBe('');
      });
      // None of them wrote anything: the data dir was not even opened.
      expect(existsSync(join(dir, 'data.mdb'))).toBe(false);
    } finally {
      removeDir(dir);
    }
  });

  it('a file it cannot read is one line and exit 1; --progress tells records and bytes on stderr, stdout unchanged', async () => {
    const missing = await runCli(['verify', '/nonexistent/ledger.jsonl'], {});
    expect([missing.code, missing.stderr, missing.stdout]).toEqual([1, 'vigil verify: cannot read /nonexistent/ledger.jsonl: ENOENT\n', '']);
    // keys list and revoke create nothing: a mistyped data dir is said, not made.
    const nowhere = join(tempDir(), 'not-a-data-dir');
    for (const args of [['keys', 'list', '--org', 'acme'], ['keys', 'revoke', 'key_0123456789abcdef']]) {
      const run = await runCli(args, { VIGIL_DATA_DIR: nowhere });
      expect([run.code, run.stderr], args.join(' ')).toEqual([1, `vigil keys: no Vigil data in ${nowhere} (set VIGIL_DATA_DIR to the server's data dir)\n`]);
    }
    expect(existsSync(nowhere)).toBe(false);
    const fixture = 'test/fixtures/ledger-v1.jsonl';
    const [quiet, told] = await Promise.all([runCli(['verify', fixture], {}), runCli(['verify', fixture, '--progress'], {})]);
    expect([quiet.code, told.code]).toEqual([0, 0]);
    expect(told.stdout).toBe(quiet.stdout);
    expect(quiet.stderr).toBe('');
    const lines = told.stderr.trimEnd().split('\n');
    expect(lines[0]).toMatch(/^verify: 1 record, \d+\.\d KB of \d+\.\d KB \(\d+%\)$/);
    expect(lines.at(-1)).toMatch(/^verify: 5 records read in \d+\.\d s$/);
  });
});

describe('orgs set-plan', () => {
  it('creates the org on a fresh data dir, says what it did, and a server started there applies the plan', async () => {
    const dir = tempDir();
    try {
      const created = await runCli(['orgs', 'set-plan', '--org', 'acme', '--plan', 'team'], { VIGIL_DATA_DIR: dir });
      expect(created).toMatchObject({ code: 0, stderr: '', stdout: '{"org":"acme","plan":"team","billing_email":null,"previous_plan":null}\ncreated org acme on plan team\n' });
      const changed = await runCli(['orgs', 'set-plan', '--org', 'acme', '--plan', 'scale', '--billing-email', 'ap@acme.example'], { VIGIL_DATA_DIR: dir });
      expect(changed).toMatchObject({
        code: 0,
        stderr: '',
        stdout: '{"org":"acme","plan":"scale","billing_email":"ap@acme.example","previous_plan":"team"}\norg acme: plan team -> scale, billing e-mail ap@acme.example\n',
      });
      const again = await runCli(['orgs', 'set-plan', '--org', 'acme', '--plan', 'scale'], { VIGIL_DATA_DIR: dir });
      expect(again.stdout.split('\n')[1]).toBe('org acme: plan scale -> scale (unchanged)');
      // The server's bootstrap key joins the existing org acme, whose plan it keeps.
      const server = await startServer({}, dir);
      try {
        expect((await call(server.url, 'GET', '/billing/plan')).body).toMatchObject({ org: 'acme', plan: 'scale', billing_email: 'ap@acme.example' });
      } finally {
        await server.close();
      }
    } finally {
      removeDir(dir);
    }
  });
});

/** Every process below `pid`, from the process table (npm → [sh →] node). */
function descendants(pid: number): number[] {
  const table = execFileSync('ps', ['-eo', 'pid=,ppid='], { encoding: 'utf8' })
    .trim()
    .split('\n')
    .map((line) => line.trim().split(/\s+/).map(Number) as [number, number]);
  const found: number[] = [];
  const walk = (parent: number): void => {
    for (const [child, ppid] of table) {
      if (ppid === parent) {
        found.push(child);
        walk(child);
      }
    }
  };
  walk(pid);
  return found;
}

const running = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

const answers = (url: string): Promise<boolean> =>
  fetch(`${url}/health`).then(
    (res) => res.ok,
    () => false,
  );

describe('npm start', () => {
  it('stops the server when the npm process gets SIGTERM', async () => {
    const dir = tempDir();
    const npm = spawn('npm', ['start'], {
      cwd: ROOT,
      env: serverEnv(dir),
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    npm.stdout.on('data', (d: Buffer) => (out += d.toString()));
    npm.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<void>((resolve) => npm.on('exit', () => resolve()));
    let below: number[] = [];
    try {
      await until(() => listeningPort(out) !== undefined, 'the listening line');
      const url = `http://127.0.0.1:${listeningPort(out)!}`;
      expect(await answers(url)).toBe(true);
      below = descendants(npm.pid!);
      expect(below.length).toBeGreaterThan(0);

      npm.kill('SIGTERM');
      await until(() => npm.exitCode !== null || npm.signalCode !== null, 'npm to exit');
      await until(() => below.every((pid) => !running(pid)), `the processes under npm (${below.join(', ')}) to end`);
      expect(await answers(url)).toBe(false);
      expect(out).toContain('"msg":"shutting down"');
    } finally {
      if (npm.exitCode === null && npm.signalCode === null) npm.kill('SIGKILL');
      await exited;
      for (const pid of below) if (running(pid)) process.kill(pid, 'SIGKILL');
      removeDir(dir);
    }
  });
});
