import { VIGIL_READY } from '../../bench/peers.js';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { loadConfig } from '../../src/config.js';
import { startRuntime, type Runtime, type RuntimeOptions } from '../../src/runtime.js';
import { captureLogger, silentLogger } from './logs.js';

export const ROOT = new URL('../..', import.meta.url).pathname;
export const ADMIN_KEY = 'vgl_test-admin-key-0123456789abcdefghijklmnopqrstuv';
export const ORG = 'acme';

export function tempDir(prefix = 'vigil-test-'): string {
  return mkdtempSync(join(tmpdir(), prefix));
}

export interface TestServer {
  url: string;
  dataDir: string;
  runtime: Runtime;
  close(): Promise<void>;
}


/** Starts the real service in this process: uWebSockets.js on port 0, LMDB in a temp dir. */
export async function startServer(
  env: Record<string, string> = {},
  dataDir = tempDir(),
  logs?: { msg: string; fields?: Record<string, unknown> }[],
  options: RuntimeOptions = {},
): Promise<TestServer> {
  const config = loadConfig({
    VIGIL_PORT: '0',
    VIGIL_DATA_DIR: dataDir,
    VIGIL_BOOTSTRAP_ORG: ORG,
    VIGIL_BOOTSTRAP_KEY: ADMIN_KEY,
    ...env,
  });
  const log = logs === undefined ? silentLogger() : captureLogger(logs);
  const runtime = await startRuntime(config, log, options);
  return {
    url: `http://127.0.0.1:${runtime.port}`,
    dataDir,
    runtime,
    close: () => runtime.close(),
  };
}

export function removeDir(dir: string): void {
  rmSync(dir, { recursive: true, force: true });
}

/** A small fetch wrapper: JSON in, status + parsed JSON (or text) out. */
export async function call(
  url: string,
  method: string,
  path: string,
  options: { key?: string | null; body?: unknown; raw?: string; headers?: Record<string, string> } = {},
): Promise<{ status: number; body: any; text: string; headers: Headers }> {
  const headers: Record<string, string> = { ...options.headers };
  const key = options.key === undefined ? ADMIN_KEY : options.key;
  if (key !== null) headers.authorization = `Bearer ${key}`;
  let payload: string | undefined;
  if (options.raw !== undefined) payload = options.raw;
  else if (options.body !== undefined) payload = JSON.stringify(options.body);
  if (payload !== undefined && headers['content-type'] === undefined) headers['content-type'] = 'application/json';
  const res = await fetch(url + path, { method, headers, body: payload });
  const text = await res.text();
  let body: any = undefined;
  try {
    body = text === '' ? undefined : JSON.parse(text);
  } catch {
    body = undefined;
  }
  return { status: res.status, body, text, headers: res.headers };
}

export interface ServerProcess {
  url: string;
  child: ChildProcess;
  output: () => string;
  exited: Promise<number | null>;
}

/** The environment of a served test instance: a free port, `dataDir`, the bootstrap admin key. */
export function serverEnv(dataDir: string, env: Record<string, string> = {}): Record<string, string> {
  return {
    PATH: process.env.PATH ?? '',
    HOME: process.env.HOME ?? '',
    VIGIL_PORT: '0',
    VIGIL_DATA_DIR: dataDir,
    VIGIL_BOOTSTRAP_ORG: ORG,
    VIGIL_BOOTSTRAP_KEY: ADMIN_KEY,
    ...env,
  };
}

/** Starts `vigil serve` as a separate process (for kill -9 tests) and waits until it listens. */
export async function spawnServer(dataDir: string, env: Record<string, string> = {}): Promise<ServerProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', 'serve'], {
    cwd: ROOT,
    env: serverEnv(dataDir, env),
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not start:\n${out}`)), 30_000);
    const onData = (): void => {
      const port = listeningPort(out);
      if (port !== undefined) {
        clearTimeout(timer);
        child.stdout.off('data', onData);
        // The bench waits for the same line with its own pattern: keep the two in step.
        if (VIGIL_READY.exec(out)?.[1] !== String(port)) reject(new Error(`bench/peers.ts VIGIL_READY does not match the listening line:\n${out}`));
        resolve(port);
      }
    };
    child.stdout.on('data', onData);
    void exited.then(() => reject(new Error(`server exited early:\n${out}`)));
  });
  return { url: `http://127.0.0.1:${port}`, child, output: () => out, exited };
}

/** The port of the `listening` log line in a server's output, once it is there. */
export function listeningPort(out: string): number | undefined {
  for (const line of out.split('\n')) {
    if (!line.includes('"msg":"listening"')) continue;
    try {
      const port = (JSON.parse(line) as { port?: unknown }).port;
      if (typeof port === 'number') return port;
    } catch {
      // a line still being written
    }
  }
  return undefined;
}

/**
 * Runs the CLI to completion; with `deadlineMs`, kills it then instead (`timedOut`): for commands
 * that must exit at once, where the bug guarded against is a CLI that serves.
 */
export function runCli(
  args: string[],
  env: Record<string, string>,
  deadlineMs?: number,
): Promise<{ code: number | null; stdout: string; stderr: string; timedOut: boolean }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/main.ts', ...args], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    let timedOut = false;
    const timer =
      deadlineMs === undefined
        ? undefined
        : setTimeout(() => {
            timedOut = true;
            child.kill('SIGKILL');
          }, deadlineMs);
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    child.on('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, timedOut });
    });
  });
}

/** A stack trace line, as Node prints them: what a CLI error must never show. */
export const STACK_LINE = /^\s+at .+\(?.+:\d+:\d+\)?$/m;

/** Parses a JSON Lines export. */
export function parseLines(text: string): any[] {
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l));
}
