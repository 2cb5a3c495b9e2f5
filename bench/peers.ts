/**
 * Child-process helpers for the macro benchmark: start a server as its own Node process, wait
 * until it says which port it listens on, stop it, and read its resident memory.
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** A running peer server (bare Fastify or bare uWebSockets.js). */
export interface Peer {
  name: string;
  /** Base URL, e.g. http://127.0.0.1:41234 (no trailing slash). */
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export interface StartedProcess {
  port: number;
  pid: number;
  stop(): Promise<void>;
  /** Everything the process wrote so far (stdout and stderr interleaved, last 64 KiB). */
  output(): string;
}

const REPO_ROOT = fileURLToPath(new URL('..', import.meta.url));
const READY_TIMEOUT_MS = 30_000;
const KILL_AFTER_MS = 5_000;
const OUTPUT_LIMIT = 64 * 1024;

/**
 * Spawns `node <args>` in the repository root with `env` merged onto the current environment,
 * and resolves once stdout matches `readyPattern` (its first capture group is the port).
 * Rejects, with the process output, on timeout (30 s) or if the process exits first.
 */
export function startProcess(
  name: string,
  args: string[],
  env: Record<string, string>,
  readyPattern: RegExp,
): Promise<StartedProcess> {
  const child = spawn(process.execPath, args, {
    cwd: REPO_ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  let stdout = '';
  let ready = false;
  let exited = child.exitCode !== null || child.signalCode !== null;
  const exitPromise = new Promise<void>((resolve) => {
    child.once('exit', () => {
      exited = true;
      resolve();
    });
  });
  const append = (text: string): void => {
    output += text;
    if (output.length > OUTPUT_LIMIT) output = output.slice(-OUTPUT_LIMIT);
  };
  // Never leave a peer behind if the benchmark itself dies.
  const killOnExit = (): void => {
    if (!exited) child.kill('SIGKILL');
  };
  process.once('exit', killOnExit);

  const stop = async (): Promise<void> => {
    if (!exited) {
      child.kill('SIGTERM');
      const timer = setTimeout(() => {
        if (!exited) child.kill('SIGKILL');
      }, KILL_AFTER_MS);
      await exitPromise;
      clearTimeout(timer);
    }
    process.removeListener('exit', killOnExit);
  };

  return new Promise<StartedProcess>((resolve, reject) => {
    const fail = (why: string): void => {
      if (ready) return;
      ready = true;
      clearTimeout(timer);
      void stop().then(() => reject(new Error(`${name}: ${why}\n--- output ---\n${output}`)));
    };
    const timer = setTimeout(() => fail(`not ready within ${READY_TIMEOUT_MS / 1000} s`), READY_TIMEOUT_MS);
    child.stdout.setEncoding('utf8');
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (text: string) => append(text));
    child.stdout.on('data', (text: string) => {
      append(text);
      if (ready) return;
      stdout += text;
      const match = readyPattern.exec(stdout);
      if (match === null) {
        if (stdout.length > OUTPUT_LIMIT) stdout = stdout.slice(-OUTPUT_LIMIT);
        return;
      }
      const port = Number(match[1]);
      if (!Number.isInteger(port) || port <= 0) {
        fail(`ready line did not carry a port: ${JSON.stringify(match[0])}`);
        return;
      }
      ready = true;
      clearTimeout(timer);
      stdout = '';
      resolve({ port, pid: child.pid ?? -1, stop, output: () => output });
    });
    child.once('error', (error) => fail(`cannot start: ${error.message}`));
    child.once('exit', (code, signal) => fail(`exited before ready (code ${code}, signal ${signal})`));
  });
}

/**
 * The `listening` line of `vigil serve` (pino puts `msg` last), with the bound port. Every server a
 * test spawns is checked against it (test/support/server.ts), so a change of log format cannot
 * silently break the bench again.
 */
export const VIGIL_READY = /"port":(\d+)[^\n]*"msg":"listening"/;

/** Starts bench/peers/<kind>.ts on a free port. */
export async function startPeer(kind: 'fastify' | 'uws'): Promise<Peer> {
  const started = await startProcess(
    kind,
    ['--import', 'tsx', `bench/peers/${kind}.ts`],
    { PORT: '0' },
    /\{"listening":(\d+)\}/,
  );
  return { name: kind, url: `http://127.0.0.1:${started.port}`, pid: started.pid, stop: () => started.stop() };
}

/** Resident set size of a process in MB (1 decimal), from /proc/<pid>/status; NaN when unavailable. */
export function rssMb(pid: number): number {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const match = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    if (match === null) return Number.NaN;
    return Math.round((Number(match[1]) / 1024) * 10) / 10;
  } catch {
    return Number.NaN;
  }
}
