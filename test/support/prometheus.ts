import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';
import { freePorts } from './nats.js';
import { removeDir, tempDir } from './server.js';

/**
 * A real Prometheus (Debian's `prometheus` package: the server and promtool) for the metrics tests:
 * it scrapes Vigil with the README's scrape config and evaluates the README's alerting rules, and
 * what it then answers to PromQL queries is what the tests check. Its parser reading our
 * exposition text is the test of that text.
 */
export const PROMETHEUS = process.env.PROMETHEUS_BIN ?? '/usr/bin/prometheus';
export const PROMTOOL = process.env.PROMTOOL_BIN ?? '/usr/bin/promtool';

/**
 * Whether Prometheus is here. Missing, its suites are skipped with a loud line, except where it is
 * required (VIGIL_REQUIRE_PROMETHEUS=1, as .ci/run sets, or CI=true).
 */
export function havePrometheus(): boolean {
  if (existsSync(PROMETHEUS) && existsSync(PROMTOOL)) return true;
  const line = `${PROMETHEUS} or ${PROMTOOL} not found: the tests that scrape GET /metrics with Prometheus are SKIPPED (apt-get install prometheus)`;
  if (process.env.VIGIL_REQUIRE_PROMETHEUS === '1' || process.env.CI === 'true') throw new Error(`${line} (VIGIL_REQUIRE_PROMETHEUS or CI is set)`);
  console.warn(`\n!!! ${line}\n`);
  return false;
}

/** promtool with `args`, `input` on its stdin. */
export function promtool(args: string[], input?: string): { code: number; output: string } {
  const run = spawnSync(PROMTOOL, args, { input, encoding: 'utf8', timeout: 30_000 });
  return { code: run.status ?? -1, output: `${run.stdout}${run.stderr}` };
}

/** The README's fenced YAML block whose first line starts with `first` (`scrape_configs:`, `groups:`). */
export function readmeYaml(first: string): string {
  const readme = readFileSync(join(import.meta.dirname, '../../README.md'), 'utf8');
  const block = [...readme.matchAll(/```ya?ml\n([\s\S]*?)```/g)].map((m) => m[1]!).find((text) => text.startsWith(first));
  if (block === undefined) throw new Error(`the README has no yaml block starting with ${first}`);
  return block;
}

export interface PromSample {
  metric: Record<string, string>;
  value: number;
}

export interface RunningPrometheus {
  url: string;
  /** An instant PromQL query's vector. */
  query(expr: string): Promise<PromSample[]>;
  /** The alerts by name and state (pending, firing). */
  alerts(): Promise<{ name: string; state: string }[]>;
  /** Every rule loaded, with its health (ok, err, unknown) and last error. */
  rules(): Promise<{ name: string; health: string; lastError?: string }[]>;
  /**
   * Waits until every target was scraped twice after `since` (Date.now()), and is up: Prometheus
   * marks a scrape done before it commits its samples, so the first one may not be queryable yet.
   */
  scrapedSince(since: number): Promise<void>;
  close(): Promise<void>;
}

/**
 * Starts Prometheus on the README's scrape config, pointed at `targets` (base URLs) with `token`
 * as the bearer, scraping and evaluating every second, with `rules` as its rule file.
 */
export async function startPrometheus(targets: string[], token: string, rules: string): Promise<RunningPrometheus> {
  const dir = tempDir('vigil-prometheus-');
  const [port] = await freePorts(1);
  writeFileSync(join(dir, 'token'), token);
  writeFileSync(join(dir, 'rules.yml'), rules);
  const config = parse(readmeYaml('scrape_configs:')) as { scrape_configs: Record<string, unknown>[] } & Record<string, unknown>;
  const job = config.scrape_configs[0]!;
  job.scrape_interval = '1s';
  (job.authorization as Record<string, unknown>).credentials_file = join(dir, 'token');
  job.static_configs = [{ targets: targets.map((url) => new URL(url).host) }];
  config.global = { scrape_interval: '1s', evaluation_interval: '1s' };
  config.rule_files = [join(dir, 'rules.yml')];
  writeFileSync(join(dir, 'prometheus.yml'), stringify(config));
  const output: string[] = [];
  const child: ChildProcess = spawn(
    PROMETHEUS,
    [`--config.file=${join(dir, 'prometheus.yml')}`, `--storage.tsdb.path=${join(dir, 'data')}`, `--web.listen-address=127.0.0.1:${port}`, '--log.level=warn'],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  child.stdout!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
  const url = `http://127.0.0.1:${port}`;
  const api = async <T>(path: string): Promise<T> => {
    const res = await fetch(`${url}${path}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`Prometheus ${path}: ${body.error ?? res.status}`);
    return body.data;
  };
  const closed = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const close = async (): Promise<void> => {
    child.kill('SIGTERM');
    await closed;
    removeDir(dir);
  };
  await until('Prometheus to be ready', async () => (await fetch(`${url}/-/ready`).catch(() => null))?.status === 200, () => output.join('')).catch(async (error: unknown) => {
    await close();
    throw error;
  });
  return {
    url,
    async query(expr) {
      const data = await api<{ result: { metric: Record<string, string>; value: [number, string] }[] }>(`/api/v1/query?query=${encodeURIComponent(expr)}`);
      return data.result.map((r) => ({ metric: r.metric, value: Number(r.value[1]) }));
    },
    async alerts() {
      const data = await api<{ alerts: { labels: { alertname: string }; state: string }[] }>('/api/v1/alerts');
      return data.alerts.map((a) => ({ name: a.labels.alertname, state: a.state }));
    },
    async rules() {
      const data = await api<{ groups: { rules: { name: string; health: string; lastError?: string }[] }[] }>('/api/v1/rules');
      return data.groups.flatMap((g) => g.rules.map((r) => ({ name: r.name, health: r.health, ...(r.lastError ? { lastError: r.lastError } : {}) })));
    },
    async scrapedSince(since) {
      const interval = 1000;
      await until(
        `Prometheus to scrape ${targets.join(', ')}`,
        async () => {
          const data = await api<{ activeTargets: { health: string; lastScrape: string; lastError: string }[] }>('/api/v1/targets?state=active');
          return data.activeTargets.length === targets.length && data.activeTargets.every((t) => t.health === 'up' && Date.parse(t.lastScrape) > since + interval);
        },
        async () => JSON.stringify(await api('/api/v1/targets?state=active')),
      );
    },
    close,
  };
}

/** Polls `ok` every 200 ms for up to 30 s; the error names `what` and `detail()`. */
export async function until(what: string, ok: () => Promise<boolean>, detail: () => string | Promise<string> = () => ''): Promise<void> {
  const end = Date.now() + 30_000;
  while (!(await ok().catch(() => false))) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}: ${await detail()}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}
