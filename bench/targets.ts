/**
 * `npm run bench -- --targets http://a:8080,http://b:8080 [--quick]`: the macro load against Vigil
 * nodes that already run (the Docker Compose cluster, say) instead of servers the bench starts:
 * `POST /events/` and `GET /agents/{id}` on each target, interleaved round by round. The API key
 * (any org's, with the events:write scope) comes from VIGIL_BENCH_KEY, not the command line, where
 * `ps` would show it. Nothing is written to bench/results, which hold the embedded-mode figures.
 */
import { measure, type MacroOptions, type Scenario } from './macro.js';
import { macroText, type MacroRow } from './report.js';

export const TARGET_AGENT = 'bench-target-agent';
const EVENT = { agent_id: TARGET_AGENT, event_type: 'output_generated', payload: { content_length: 512 }, dti: 0.1 };
const READY_MS = 30_000;

/** The base URLs of `--targets a,b` (or `--targets=a,b`), null without the option; throws on a bad one. */
export function parseTargets(argv: readonly string[]): string[] | null {
  const at = argv.findIndex((arg) => arg === '--targets' || arg.startsWith('--targets='));
  if (at === -1) return null;
  const arg = argv[at]!;
  const value = arg === '--targets' ? argv[at + 1] : arg.slice('--targets='.length);
  const urls = (value ?? '').split(',').map((u) => u.trim()).filter((u) => u !== '');
  if (urls.length === 0 || value?.startsWith('--') === true) {
    throw new Error('--targets needs comma-separated base URLs, e.g. --targets http://vigil-1:8080,http://vigil-2:8080');
  }
  const bases = urls.map((text) => {
    const url = URL.canParse(text) ? new URL(text) : null;
    if (url === null || (url.protocol !== 'http:' && url.protocol !== 'https:') || url.search !== '' || url.hash !== '' || url.username !== '') {
      throw new Error(`--targets: not an http(s) base URL: ${text}`);
    }
    return text.replace(/\/+$/, '');
  });
  if (new Set(bases).size !== bases.length) throw new Error(`--targets names a URL twice: ${value}`);
  return bases;
}

export interface TargetsOptions extends MacroOptions {
  urls: string[];
  key: string;
}

/** Registers the bench agent, waits until every target reads it, then measures each target. */
export async function runTargets(options: TargetsOptions): Promise<MacroRow[]> {
  const auth = { authorization: `Bearer ${options.key}` };
  const json = { ...auth, 'content-type': 'application/json' };
  const first = options.urls[0];
  if (first === undefined) throw new Error('runTargets: no target');
  // Through the first target only: the nodes of a cluster share the org. 409: a run before made it.
  await untilAnswered(first, 'POST', '/agents/', json, JSON.stringify({ agent_id: TARGET_AGENT, name: 'Bench Agent' }), [201, 409]);
  for (const url of options.urls) await untilAnswered(url, 'GET', `/agents/${TARGET_AGENT}`, auth, undefined, [200]);
  const targets = options.urls.map((url) => ({ name: url, url }));
  const scenarios: Scenario[] = [
    { name: 'POST /events/', method: 'POST', path: '/events/', headers: json, body: JSON.stringify(EVENT), targets },
    { name: 'GET /agents/{id}', method: 'GET', path: `/agents/${TARGET_AGENT}`, headers: auth, targets },
  ];
  return measure(scenarios, options);
}

/**
 * Sends the request until it gets one of `expected`, retrying while the target is unreachable or
 * answers 503 (starting, or no partition owner yet); any other answer, or the deadline, throws.
 */
async function untilAnswered(base: string, method: string, path: string, headers: Record<string, string>, body: string | undefined, expected: number[]): Promise<void> {
  const deadline = Date.now() + READY_MS;
  let last = '';
  while (Date.now() < deadline) {
    // Status 0: no answer at all (refused, reset), as while a node starts.
    const answer = await fetch(base + path, { method, headers, ...(body === undefined ? {} : { body }) }).then(
      async (res) => ({ status: res.status, text: await res.text() }),
      (error: unknown) => ({ status: 0, text: String(error) }),
    );
    if (expected.includes(answer.status)) return;
    if (answer.status !== 0 && answer.status !== 503) throw new Error(`${method} ${base}${path} answered ${answer.status}: ${answer.text}`);
    last = `${answer.status} ${answer.text}`;
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  throw new Error(`${method} ${base}${path}: no answer in ${READY_MS / 1000} s (last: ${last})`);
}

/**
 * The `--targets` run of `npm run bench`, with macro's timings: prints the table and answers the
 * exit code (0; 1 if any request failed, so a run that measured errors does not pass for figures;
 * 2 on bad usage).
 */
export async function benchTargets(urls: string[], quick: boolean, key: string | undefined, log: (line: string) => void): Promise<number> {
  if (key === undefined || key === '') {
    log('--targets needs VIGIL_BENCH_KEY: an API key with the events:write scope, of any org the targets serve');
    return 2;
  }
  const timing = quick ? { rounds: 1, seconds: 3, warmupSeconds: 1 } : { rounds: 3, seconds: 8, warmupSeconds: 1 };
  const rows = await runTargets({ urls, key, ...timing, connections: 64, log });
  log(`\n${macroText(rows)}\n`);
  const errors = rows.reduce((n, r) => n + r.errors, 0);
  if (errors === 0) return 0;
  log(`${errors} requests failed (socket errors, or answers outside 2xx: 429 quota_exceeded once a free org passes its monthly events)`);
  return 1;
}
