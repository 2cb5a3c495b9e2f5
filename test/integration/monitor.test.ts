import { spawn } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { copyFileSync, existsSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer as createHttpServer } from 'node:http';
import { createServer, type AddressInfo } from 'node:net';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { noteKey, parseVerifierKey, rawPublicKey, verifierKey } from '../../src/domain/signed-note.js';
import { call, parseLines, removeDir, ROOT, runCli, STACK_LINE, startServer, tempDir, type TestServer } from '../support/server.js';

// `vigil monitor` (DESIGN §10) as an operator runs it: a child process against real servers over
// HTTP. Servers A and B share one log key and one base URL, so one origin, with different records:
// B is a fork of A that the monitor must catch.

const BASE_URL = 'https://vigil.example';
const ORIGIN = 'vigil.example/vigil/acme';
const USAGE_LINE = /^usage: vigil monitor <base url> <org>/;
/** A key the servers do not sign with. */
const freshKey = verifierKey(noteKey('vigil.example/vigil', rawPublicKey(generateKeyPairSync('ed25519').privateKey)));

type Run = Awaited<ReturnType<typeof runCli>>;

const monitor = (args: string[]): Promise<Run> => runCli(['monitor', ...args], {}, 30_000);

interface State {
  origin: string;
  size: number;
  root: string;
  seen_at: string;
}

const readState = (file: string): State => JSON.parse(readFileSync(file, 'utf8'));

/** A loopback port nothing listens on (for now). */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer().listen(0, '127.0.0.1', () => {
      const { port } = server.address() as AddressInfo;
      server.close(() => resolve(port));
    });
    server.on('error', reject);
  });
}

async function ingest(server: TestServer, n: number, tag: string): Promise<void> {
  const events = Array.from({ length: n }, (_, i) => ({ agent_id: 'a', event_type: 'config_read', payload: { tag, i } }));
  expect((await call(server.url, 'POST', '/events/batch', { body: { events } })).status).toBe(200);
}

/** The public checkpoint, once it covers every record of the ledger (signed within a second). */
async function settled(server: TestServer): Promise<{ size: number; root: Buffer }> {
  const size = parseLines((await call(server.url, 'GET', '/audit/export')).text).length;
  let lines: string[] = [];
  await expect
    .poll(
      async () => {
        lines = (await call(server.url, 'GET', '/public/checkpoints/acme', { key: null })).text.split('\n');
        return Number(lines[1]);
      },
      { timeout: 5000, interval: 100 },
    )
    .toBe(size);
  return { size, root: Buffer.from(lines[2]!, 'base64') };
}

describe('vigil monitor', () => {
  const dir = tempDir('vigil-monitor-');
  const file = (name: string): string => join(dir, name);
  let a: TestServer;
  let b: TestServer;
  let vkey: string;
  /** A's checkpoints as the monitor recorded them: after its first run and its second. */
  let first: State;
  let second: State;
  /** The runs that need no server, started first so that they overlap the servers' start (each is a Node process). */
  let usageRuns: Promise<{ args: string[]; code: number; first: RegExp; run: Run }[]>;

  const startA = (port = '0'): Promise<TestServer> => startServer(env(port), file('a'));
  const env = (port = '0'): Record<string, string> => ({ VIGIL_LOG_KEY: file('log-key.pem'), VIGIL_BASE_URL: BASE_URL, VIGIL_PUBLIC_RATE_LIMIT: '100000', VIGIL_PORT: port });

  beforeAll(async () => {
    const state = file('unused.json');
    const closed = `http://127.0.0.1:${await freePort()}`;
    // One bad argument stands for all (test/unit/log-monitor.test.ts has the rest).
    const cases: [string[], number, RegExp][] = [
      [['--help'], 0, USAGE_LINE],
      [[closed, 'acme', '--key', 'vigil.example/vigil+00000000+AAAA', '--state', state], 1, /^vigil monitor: --key: not a verifier key .*\(see vigil monitor --help\)$/],
      [[closed, 'acme', '--key', freshKey, '--state', state, '--progress'], 1, /^vigil monitor: --progress applies to --follow \(see vigil monitor --help\)$/],
      [[closed, 'acme', '--key', freshKey, '--state', state], 1, /^GET http:\/\/127\.0\.0\.1:\d+\/public\/checkpoints\/acme: .*ECONNREFUSED/],
    ];
    usageRuns = Promise.all(cases.map(async ([args, code, first]) => ({ args, code, first, run: await monitor(args) })));
    writeFileSync(file('log-key.pem'), generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }));
    [a, b] = await Promise.all([startA(), startServer(env(), file('b'))]);
    for (const [server, tag] of [[a, 'A'], [b, 'B']] as const) {
      expect((await call(server.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } })).status).toBe(201);
      expect((await call(server.url, 'PATCH', '/admin/agents/a', { body: { public: true } })).status).toBe(200);
      await ingest(server, 5, tag);
    }
    vkey = (await call(a.url, 'GET', '/public/log-key', { key: null })).text.trim();
    writeFileSync(file('vkey.txt'), `${vkey}\n`);
  });
  afterAll(async () => {
    await Promise.allSettled([a.close(), b.close()]);
    removeDir(dir);
  });

  it('prints its usage for --help; bad arguments get one line and exit 1 (2 is an alarm); an unreachable server exit 1', async () => {
    for (const { args, code, first, run } of await usageRuns) {
      const what = args.join(' ');
      expect(run.code, what).toBe(code);
      const [line] = (code === 0 ? run.stdout : run.stderr).split('\n');
      expect(line, what).toMatch(first);
      if (code !== 0) expect(run.stderr, what).toBe(`${line}\n`);
      expect(run.stderr, what).not.toMatch(STACK_LINE);
    }
    expect(existsSync(file('unused.json'))).toBe(false);
  });

  it('records the first checkpoint, then proves the next consistent with it and advances', async () => {
    const state = file('a.json');
    const one = await settled(a);
    const run1 = await monitor([a.url, 'acme', '--key', `@${file('vkey.txt')}`, '--state', state]);
    expect(run1.stderr).toBe('');
    expect(run1.code).toBe(0);
    expect(run1.stdout).toBe(`acme: size ${one.size}, root ${one.root.toString('hex').slice(0, 16)}…, first checkpoint seen, recorded in ${state}\n`);
    first = readState(state);
    expect(first).toMatchObject({ origin: ORIGIN, size: one.size, root: one.root.toString('hex') });

    await ingest(a, 3, 'A2');
    const two = await settled(a);
    const run2 = await monitor([a.url, 'acme', '--key', vkey, '--state', state]);
    expect(run2.code).toBe(0);
    expect(run2.stdout).toMatch(new RegExp(`^acme: size ${two.size}, root ${two.root.toString('hex').slice(0, 16)}…, consistent with size ${one.size}\\n$`));
    second = readState(state);
    expect(second).toMatchObject({ origin: ORIGIN, size: two.size, root: two.root.toString('hex') });
    expect(second.seen_at >= first.seen_at).toBe(true);
  });

  it('exits 2 on a fork or a bad signature, naming the sizes and roots, and keeps the state', async () => {
    // B: the same key and origin, other records; grown past A's first checkpoint, it does not extend it.
    await ingest(b, 4, 'B2');
    const atB = await settled(b);
    expect(atB.size).toBeGreaterThan(first.size);
    for (const name of ['fork', 'bad-key']) writeFileSync(file(`${name}.json`), JSON.stringify(first));
    const [fork, badKey] = await Promise.all([
      monitor([b.url, 'acme', '--key', vkey, '--state', file('fork.json')]),
      monitor([b.url, 'acme', '--key', freshKey, '--state', file('bad-key.json')]),
    ]);
    for (const run of [fork, badKey]) {
      expect(run.code, run.stderr).toBe(2);
      expect(run.stdout).toBe('');
      expect(run.stderr.trimEnd().split('\n')).toHaveLength(1);
    }
    const hex = atB.root.toString('hex');
    expect(fork.stderr).toBe(
      `FORK: ${b.url}/public/proof/acme/consistency?from=${first.size}&to=${atB.size} does not prove size ${atB.size} (root ${hex}) an extension of size ${first.size} (root ${first.root}) seen at ${first.seen_at} (RFC 9162 §2.1.4.2)\n`,
    );
    const keyId = parseVerifierKey(freshKey)!.keyId.toString('hex');
    expect(badKey.stderr).toBe(`BAD SIGNATURE: ${b.url}/public/checkpoints/acme: no valid signature by vigil.example/vigil+${keyId} on its checkpoint of size ${atB.size} (root ${hex})\n`);
    for (const name of ['fork', 'bad-key']) expect(readState(file(`${name}.json`)), name).toEqual(first);
  });

  it('--follow reports and retries while the server is unreachable, prints a line per new checkpoint, and exits 0 on SIGINT', async () => {
    // A moves to a port where nothing listens yet, so the monitor starts with a network error.
    await a.close();
    const url = `http://127.0.0.1:${await freePort()}`;
    const state = file('follow.json');
    copyFileSync(file('a.json'), state);
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'monitor', url, 'acme', '--key', vkey, '--state', state, '--follow', '--interval', '0.2', '--progress'], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '' },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    const lines = (): string[] => stdout.split('\n').filter((l) => l !== '');
    try {
      await expect.poll(() => stderr, { timeout: 15_000, interval: 50 }).toMatch(/^GET .*\/public\/checkpoints\/acme: .*ECONNREFUSED.*; retrying every 0\.2 s$/m);
      a = await startA(new URL(url).port);
      await expect.poll(lines, { timeout: 10_000, interval: 50 }).toEqual([`acme: size ${second.size}, root ${second.root.slice(0, 16)}…, unchanged since ${second.seen_at}`]);
      expect(stderr).toMatch(/answering again after \d+ failed attempts?$/m);
      // --progress: polls that find nothing new are told on stderr (stdout has only the checkpoints).
      await expect.poll(() => stderr, { timeout: 5_000, interval: 50 }).toMatch(new RegExp(`^monitor: acme at size ${second.size}, nothing new at poll \\d+ \\(\\d{4}-`, 'm'));

      await ingest(a, 2, 'A3');
      const three = await settled(a);
      await expect.poll(() => lines()[1], { timeout: 5000, interval: 50 }).toBe(`acme: size ${three.size}, root ${three.root.toString('hex').slice(0, 16)}…, consistent with size ${second.size}`);
      expect(readState(state).size).toBe(three.size);

      child.kill('SIGINT');
      expect(await exited).toBe(0);
      expect(lines()).toHaveLength(2);
      expect(stderr).not.toMatch(STACK_LINE);
    } finally {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    }
  });

  it('a log that serves a larger signed checkpoint but withholds its proof: exit 1 once, an alarm under --follow', async () => {
    // A real HTTP front of server A, as a dishonest operator could put up: checkpoints pass through,
    // consistency proofs are refused.
    const front = createHttpServer((req, res) => {
      if (req.url?.startsWith('/public/proof/') === true) {
        res.writeHead(503, { 'content-type': 'application/json' }).end(JSON.stringify({ error: { code: 'unavailable', message: 'try later' } }));
        return;
      }
      void fetch(`${a.url}${req.url ?? '/'}`).then(async (answer) => res.writeHead(answer.status, { 'content-type': answer.headers.get('content-type') ?? 'text/plain' }).end(await answer.text()));
    });
    await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(front.address() as AddressInfo).port}`;
    try {
      const now = await settled(a);
      expect(now.size).toBeGreaterThan(first.size);
      const proofUrl = `${url}/public/proof/acme/consistency?from=${first.size}&to=${now.size}`;
      const unproven = `${url}/public/checkpoints/acme signs size ${now.size} (root ${now.root.toString('hex')}), but gives no proof that it extends size ${first.size}: GET ${proofUrl}: HTTP 503 (try later)`;
      for (const name of ['withheld-once', 'withheld-follow']) writeFileSync(file(`${name}.json`), JSON.stringify(first));
      const [once, follow] = await Promise.all([
        monitor([url, 'acme', '--key', vkey, '--state', file('withheld-once.json')]),
        monitor([url, 'acme', '--key', vkey, '--state', file('withheld-follow.json'), '--follow', '--interval', '0.1', '--withheld', '3']),
      ]);
      expect(once.code, once.stderr).toBe(1);
      expect(once.stderr).toBe(`${unproven}; not judged (--follow raises an alarm when it goes on)\n`);
      expect(follow.code, follow.stderr).toBe(2);
      expect(follow.stderr.trimEnd().split('\n')).toEqual([
        `${unproven}; retrying every 0.1 s (an alarm after 3 polls in a row)`,
        `WITHHELD PROOF: ${unproven}, 3 polls in a row: a log that signs a checkpoint must prove it extends what it signed before`,
      ]);
      for (const name of ['withheld-once', 'withheld-follow']) expect(readState(file(`${name}.json`)), name).toEqual(first);
    } finally {
      await new Promise((resolve) => front.close(resolve));
    }
  });
});
