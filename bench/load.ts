/**
 * HTTP load generation for the macro benchmark: wrk when it is installed (it is faster than the
 * servers under test, so it measures them rather than itself), autocannon otherwise.
 *
 *   VIGIL_BENCH_TOOL=autocannon|wrk  force a tool (wrk fails if it cannot be found)
 *   WRK_BIN=/path/to/wrk             use this wrk binary instead of searching PATH
 *   VIGIL_BENCH_THREADS=n            wrk threads (default: the cores the server leaves, 1 to 2)
 */
import autocannon from 'autocannon';
import { execFile } from 'node:child_process';
import { accessSync, constants, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';

export interface LoadSpec {
  url: string;
  method: 'GET' | 'POST';
  headers?: Record<string, string>;
  body?: string;
  /**
   * Header sets taken in turn, one per request, round robin (e.g. many orgs' keys), over
   * `headers`. wrk builds the requests once in its Lua setup and hands them out in `request()`.
   */
  rotate?: Record<string, string>[];
  /**
   * Request paths taken in turn (e.g. random records), over the url's path; with `rotate`, request
   * i takes path i and header set i (each list repeating).
   */
  paths?: string[];
  connections: number;
  durationSec: number;
}

export interface LoadResult {
  tool: 'wrk' | 'autocannon';
  rps: number;
  /** Milliseconds, 2 decimals. */
  p50: number;
  /** Milliseconds, 2 decimals. */
  p99: number;
  /** Socket errors (connect/read/write/timeout) plus non-2xx responses. */
  errors: number;
  requests: number;
}

/** The load generator runLoad will use. */
export function loadTool(): 'wrk' | 'autocannon' {
  const forced = (process.env.VIGIL_BENCH_TOOL ?? '').trim().toLowerCase();
  if (forced === 'autocannon') return 'autocannon';
  if (forced === 'wrk') {
    if (findWrk() === null) throw new Error('VIGIL_BENCH_TOOL=wrk but no wrk binary found (set WRK_BIN or add it to PATH)');
    return 'wrk';
  }
  if (forced !== '') throw new Error(`VIGIL_BENCH_TOOL must be "wrk" or "autocannon", not ${JSON.stringify(forced)}`);
  return findWrk() === null ? 'autocannon' : 'wrk';
}

export async function runLoad(spec: LoadSpec): Promise<LoadResult> {
  if (!(spec.connections >= 1) || !(spec.durationSec >= 1)) {
    throw new Error(`runLoad: connections and durationSec must be >= 1 (got ${spec.connections}, ${spec.durationSec})`);
  }
  return loadTool() === 'wrk' ? runWrk(spec, findWrk()!) : runAutocannon(spec);
}

// ---------------------------------------------------------------------------------------------
// wrk

function isExecutableFile(path: string): boolean {
  try {
    accessSync(path, constants.X_OK);
    return statSync(path).isFile();
  } catch {
    return false;
  }
}

function findWrk(): string | null {
  const explicit = process.env.WRK_BIN;
  if (explicit !== undefined && explicit !== '') return isExecutableFile(explicit) ? explicit : null;
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir === '') continue;
    const candidate = join(dir, 'wrk');
    if (isExecutableFile(candidate)) return candidate;
  }
  return null;
}

/**
 * wrk's threads. The servers under test run their HTTP loop on one thread; a load generator with
 * as many threads as there are cores makes them share a core with it, and the time slices the
 * server then waits for set the tail latency rather than the server's own work. So wrk takes the
 * cores the server leaves: one on a 2-core machine, two (enough to saturate these servers) above.
 */
export function wrkThreads(): number {
  const forced = (process.env.VIGIL_BENCH_THREADS ?? '').trim();
  if (forced !== '') {
    const n = Number(forced);
    if (!Number.isInteger(n) || n < 1 || n > 64) throw new Error(`VIGIL_BENCH_THREADS must be an integer from 1 to 64, not ${JSON.stringify(forced)}`);
    return n;
  }
  return Math.max(1, Math.min(2, availableParallelism() - 1));
}

/** A Lua string literal for any text: printable ASCII as is, every other byte as \ddd. */
function luaString(text: string): string {
  let out = '"';
  for (const byte of Buffer.from(text, 'utf8')) {
    if (byte >= 0x20 && byte < 0x7f && byte !== 0x22 && byte !== 0x5c) out += String.fromCharCode(byte);
    else out += `\\${String(byte).padStart(3, '0')}`;
  }
  return `${out}"`;
}

/**
 * The request setup only. Errors come from wrk's own summary ("Non-2xx or 3xx responses" counts
 * statuses of 400 and above, plus socket errors): a Lua response() callback would parse every
 * response in wrk and take CPU from the server under test on a small machine.
 */
function wrkScript(spec: LoadSpec): string {
  const lines = [`wrk.method = ${luaString(spec.method)}`];
  for (const [name, value] of Object.entries(spec.headers ?? {})) {
    lines.push(`wrk.headers[${luaString(name)}] = ${luaString(value)}`);
  }
  if (spec.body !== undefined) lines.push(`wrk.body = ${luaString(spec.body)}`);
  const sets = spec.rotate ?? [];
  const paths = spec.paths ?? [];
  if (sets.length > 0 || paths.length > 0) {
    // Each thread builds the requests once; request() takes them in turn (no per-request work).
    lines.push('local sets = {');
    for (const set of sets) lines.push(`  { ${Object.entries(set).map(([name, value]) => `[${luaString(name)}] = ${luaString(value)}`).join(', ')} },`);
    lines.push('}', 'local paths = {');
    for (const path of paths) lines.push(`  ${luaString(path)},`);
    lines.push('}', 'local requests = {}', 'local n = 0', 'local at = 0', 'init = function(args)');
    lines.push('  n = math.max(#sets, #paths)', '  for i = 1, n do', '    local h = {}', '    for k, v in pairs(wrk.headers) do h[k] = v end');
    lines.push('    if #sets > 0 then for k, v in pairs(sets[(i - 1) % #sets + 1]) do h[k] = v end end');
    lines.push('    requests[i] = wrk.format(nil, #paths > 0 and paths[(i - 1) % #paths + 1] or nil, h)', '  end');
    lines.push('end', 'request = function()', '  at = at % n + 1', '  return requests[at]', 'end');
  }
  lines.push('');
  return lines.join('\n');
}

/** wrk prints durations as e.g. 812.00us, 1.23ms, 2.00s, 1.50m, 1.00h. */
function toMs(value: string, unit: string): number {
  const n = Number(value);
  switch (unit) {
    case 'us':
      return n / 1000;
    case 'ms':
      return n;
    case 's':
      return n * 1000;
    case 'm':
      return n * 60_000;
    case 'h':
      return n * 3_600_000;
    default:
      return Number.NaN;
  }
}

function round2(n: number): number {
  return Math.round(n * 100) / 100;
}

export function parseWrk(output: string): Omit<LoadResult, 'tool'> {
  const need = (re: RegExp, what: string): RegExpExecArray => {
    const match = re.exec(output);
    if (match === null) throw new Error(`cannot parse wrk output (${what}):\n${output}`);
    return match;
  };
  const percentile = (p: number): number => {
    const match = need(new RegExp(`^\\s*${p}%\\s+([\\d.]+)(us|ms|s|m|h)\\s*$`, 'm'), `${p}% latency`);
    return round2(toMs(match[1]!, match[2]!));
  };
  const rps = Number(need(/^Requests\/sec:\s+([\d.]+)/m, 'Requests/sec')[1]);
  const requests = Number(need(/^\s*(\d+) requests in /m, 'requests in')[1]);
  let socketErrors = 0;
  const socket = /Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)/.exec(output);
  if (socket !== null) socketErrors = socket.slice(1, 5).reduce((sum, n) => sum + Number(n), 0);
  // Our Lua counter sees every status outside 2xx; wrk's own line only counts status > 399.
  const lua = /^NON2XX (\d+)\s*$/m.exec(output);
  const wrkNon2xx = /Non-2xx or 3xx responses: (\d+)/.exec(output);
  const non2xx = lua !== null ? Number(lua[1]) : wrkNon2xx !== null ? Number(wrkNon2xx[1]) : 0;
  return { rps: round2(rps), p50: percentile(50), p99: percentile(99), errors: socketErrors + non2xx, requests };
}

async function runWrk(spec: LoadSpec, wrk: string): Promise<LoadResult> {
  const dir = mkdtempSync(join(tmpdir(), 'vigil-wrk-'));
  try {
    const script = join(dir, 'request.lua');
    writeFileSync(script, wrkScript(spec));
    const threads = Math.max(1, Math.min(wrkThreads(), spec.connections));
    const args = [
      `-t${threads}`,
      `-c${spec.connections}`,
      `-d${spec.durationSec}s`,
      '--latency',
      '-s',
      script,
      spec.url,
    ];
    const output = await new Promise<string>((resolve, reject) => {
      execFile(
        wrk,
        args,
        { timeout: (spec.durationSec + 30) * 1000, maxBuffer: 16 * 1024 * 1024, encoding: 'utf8' },
        (error, stdout, stderr) => {
          if (error !== null) reject(new Error(`wrk failed: ${error.message}\n${stdout}${stderr}`));
          else resolve(stdout + stderr);
        },
      );
    });
    return { tool: 'wrk', ...parseWrk(output) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

// ---------------------------------------------------------------------------------------------
// autocannon

async function runAutocannon(spec: LoadSpec): Promise<LoadResult> {
  const options: autocannon.Options = {
    url: spec.url,
    method: spec.method,
    connections: spec.connections,
    duration: spec.durationSec,
  };
  if (spec.headers !== undefined) options.headers = spec.headers;
  if (spec.body !== undefined) options.body = spec.body;
  const sets = spec.rotate ?? [];
  const paths = spec.paths ?? [];
  if (sets.length > 0 || paths.length > 0) {
    options.requests = Array.from({ length: Math.max(sets.length, paths.length) }, (_, i) => ({
      headers: { ...spec.headers, ...sets[i % Math.max(sets.length, 1)] },
      ...(paths.length > 0 ? { path: paths[i % paths.length]! } : {}),
    }));
  }
  const result = await autocannon(options);
  const total = result.requests.total;
  const rps =
    Number.isFinite(result.requests.average) && result.requests.average > 0
      ? result.requests.average
      : result.duration > 0
        ? total / result.duration
        : 0;
  return {
    tool: 'autocannon',
    rps: round2(rps),
    p50: round2(result.latency.p50),
    p99: round2(result.latency.p99),
    // autocannon's `errors` already includes `timeouts` (it counts a timeout as both).
    errors: result.errors + result.non2xx,
    requests: total,
  };
}
