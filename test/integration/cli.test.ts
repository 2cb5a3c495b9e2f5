import { execFileSync, spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { listeningPort, removeDir, ROOT, runCli, serverEnv, STACK_LINE, tempDir } from '../support/server.js';

/** Runs `run` over `items`, three at a time (each is a Node process; the machine is shared). */
async function inTurns<T, R>(items: readonly T[], run: (item: T) => Promise<R>): Promise<R[]> {
  const results: R[] = [];
  for (let i = 0; i < items.length; i += 3) results.push(...(await Promise.all(items.slice(i, i + 3).map(run))));
  return results;
}

describe('CLI usage', () => {
  it('prints the usage and exits 0 for help, on every command, without a stack trace', async () => {
    const dir = tempDir();
    try {
      const cases = [['help'], ['--help'], ['-h'], ['serve', '--help'], ['keys', '--help'], ['keys', 'create', '--help'], ['orgs', '--help'], ['orgs', 'set-plan', '-h'], ['verify', '--help']];
      const runs = await inTurns(cases, (args) => runCli(args, { VIGIL_DATA_DIR: dir, VIGIL_PORT: '0' }));
      runs.forEach((run, i) => {
        const what = cases[i]!.join(' ');
        expect(run.timedOut, what).toBe(false);
        expect(run.code, what).toBe(0);
        expect(run.stdout, what).toContain('usage: vigil <command>');
        expect(run.stdout, what).toContain('keys create --org <slug>');
        expect(run.stderr, what).not.toMatch(STACK_LINE);
      });
    } finally {
      removeDir(dir);
    }
  });

  it('answers unknown flags, commands and missing arguments with one line and the usage, exit 2, no stack trace', async () => {
    const dir = tempDir();
    try {
      const cases: [string[], RegExp][] = [
        [['keys', 'create', '--org', 'a', '--scopes', 'admin', '--bogus'], /^Unknown option '--bogus'/],
        [['keys', 'create', '--org'], /^Option '--org <value>' argument missing/],
        [['keys', 'create', '--scopes', 'admin'], /^keys create needs --org and --scopes$/],
        [['keys'], /^keys: name a subcommand; use create, list or revoke$/],
        [['keys', 'delete'], /^keys: unknown subcommand delete; use create, list or revoke$/],
        [['keys', 'revoke'], /^keys revoke needs one key id /],
        [['orgs', 'set-plan', '--org', 'a', '--plan', 'team', '--nope'], /^Unknown option '--nope'/],
        [['orgs', 'set-plan', '--org', 'a'], /^orgs set-plan needs --org and --plan$/],
        [['verify', '--what', 'x.jsonl'], /^Unknown option '--what'/],
        [['verify'], /^verify needs a ledger file or a bundle$/],
        [['verify', 'a.jsonl', 'b.jsonl'], /^unexpected argument b\.jsonl$/],
        [['serve', '--port', '1'], /^Unknown option '--port'/],
        [['serve', 'now'], /^unexpected argument now$/],
        [['frobnicate'], /^unknown command frobnicate$/],
      ];
      const runs = await inTurns(cases, ([args]) => runCli(args, { VIGIL_DATA_DIR: dir, VIGIL_PORT: '0' }));
      runs.forEach((run, i) => {
        const [args, first] = cases[i]!;
        const what = args.join(' ');
        expect(run.timedOut, what).toBe(false);
        expect(run.code, what).toBe(2);
        const [line, ...rest] = run.stderr.trimEnd().split('\n');
        expect(line, what).toMatch(first);
        expect(rest[0], what).toBe('usage: vigil <command>');
        expect(run.stderr, what).not.toMatch(STACK_LINE);
        expect(run.stdout, what).toBe('');
      });
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
