import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { z } from 'zod';
import { confBlock, confText, parseNatsConf, type NatsConf } from './nats-conf.js';
import { freePorts, type NatsNodeConfig } from './nats.js';
import { ROOT } from './server.js';

/**
 * docker-compose.yml as the tests read it: the part of the Compose spec the file uses, checked
 * with strict zod objects so a misspelt key fails rather than being ignored by the tests.
 */
const service = z.strictObject({
  image: z.string(),
  command: z.array(z.string()).optional(),
  working_dir: z.string().optional(),
  restart: z.string().optional(),
  environment: z.record(z.string(), z.string()).optional(),
  ports: z.array(z.string()).optional(),
  volumes: z.array(z.string()).optional(),
  configs: z.array(z.strictObject({ source: z.string(), target: z.string() })).optional(),
  profiles: z.array(z.string()).optional(),
  depends_on: z.record(z.string(), z.strictObject({ condition: z.string() })).optional(),
  healthcheck: z
    .strictObject({ test: z.array(z.string()), interval: z.string(), timeout: z.string(), retries: z.number(), start_period: z.string() })
    .optional(),
});
const composeFile = z.object({
  services: z.record(z.string(), service),
  configs: z.record(z.string(), z.strictObject({ content: z.string() })),
  volumes: z.record(z.string(), z.null()),
});
export type ComposeService = z.infer<typeof service>;
export type ComposeFile = z.infer<typeof composeFile>;

export const COMPOSE_PATH = join(ROOT, 'docker-compose.yml');

/** The file's top-level keys, and the file parsed (YAML merge keys `<<` resolved, as Compose does). */
export function readCompose(): { keys: string[]; file: ComposeFile } {
  const raw = parse(readFileSync(COMPOSE_PATH, 'utf8'), { merge: true }) as Record<string, unknown>;
  return { keys: Object.keys(raw), file: composeFile.parse(raw) };
}

/**
 * Compose's interpolation of the forms the file uses, `${VAR}`, `${VAR:-default}`, `${VAR-default}`
 * and `$$`, against `env` (the tests pass none: every default applies). Unset without a default throws.
 */
export function interpolate(text: string, env: Record<string, string> = {}): string {
  return text.replace(/\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)(?:(:?)-([^}]*))?\}/g, (whole, name: string | undefined, colon: string | undefined, fallback: string | undefined) => {
    if (name === undefined) return '$';
    const value = env[name];
    if (value !== undefined && !(colon === ':' && value === '')) return value;
    if (fallback !== undefined) return fallback;
    throw new Error(`${whole}: ${name} is not set and has no default`);
  });
}

/** A service's environment, interpolated. */
export function environmentOf(s: ComposeService, env: Record<string, string> = {}): Record<string, string> {
  return Object.fromEntries(Object.entries(s.environment ?? {}).map(([k, v]) => [k, interpolate(v, env)]));
}

/** `host:port`, or an URL's host and port. */
export function addressOf(text: string): { host: string; port: number } {
  const match = /^(?:[a-z-]+:\/\/)?([^:/]+):(\d+)\/?$/.exec(text);
  if (match === null) throw new Error(`not host:port: ${text}`);
  return { host: match[1]!, port: Number(match[2]) };
}

/** `[ip:]host:container` port mappings. */
export function publishedPorts(s: ComposeService): { ip: string | null; host: number; container: number }[] {
  return (s.ports ?? []).map((p) => {
    const match = /^(?:([\d.]+):)?(\d+):(\d+)$/.exec(p);
    if (match === null) throw new Error(`unexpected port mapping ${p}`);
    return { ip: match[1] ?? null, host: Number(match[2]), container: Number(match[3]) };
  });
}

/** Short-syntax mounts; `named` for a volume (its source names one), else a bind mount of a host path. */
export function mountsOf(s: ComposeService): { source: string; target: string; readOnly: boolean; named: boolean }[] {
  return (s.volumes ?? []).map((v) => {
    const [source = '', target = '', mode, ...rest] = v.split(':');
    if (target === '' || rest.length > 0 || (mode !== undefined && mode !== 'ro' && mode !== 'rw')) throw new Error(`unexpected volume ${v}`);
    return { source, target, readOnly: mode === 'ro', named: !/^[./~]/.test(source) };
  });
}

/** The nats.conf a NATS service runs: the `configs:` content mounted where its `-c` argument points. */
export function natsConfigOf(file: ComposeFile, name: string): NatsConf {
  const s = file.services[name];
  const command = s?.command ?? [];
  const path = command[command.indexOf('-c') + 1];
  const source = s?.configs?.find((c) => c.target === path)?.source;
  const content = source === undefined ? undefined : file.configs[source]?.content;
  if (path === undefined || content === undefined) throw new Error(`${name}: no config content behind its -c ${path ?? '(none)'}`);
  return parseNatsConf(content);
}

export const natsServices = (file: ComposeFile): string[] => Object.keys(file.services).filter((n) => file.services[n]!.image.startsWith('nats:'));
export const vigilServices = (file: ComposeFile): string[] => Object.keys(file.services).filter((n) => environmentOf(file.services[n]!).VIGIL_NATS_URL !== undefined);

/**
 * The NATS services' configs, rewritten to run here as local processes: every address a config
 * gives its server (client, monitoring, cluster) moves to a free loopback port, routes to the
 * other services follow them, and store_dir goes under `dir`. `sync_interval` is DROPPED: Debian's
 * nats-server 2.9.10, which the tests run, refuses the option (unknown field); the file's
 * nats:2.12 image keeps it. `addresses` maps a service's `name:port` to its `127.0.0.1:port` here.
 */
export async function localNatsConfigs(file: ComposeFile, dir: string): Promise<{ configs: NatsNodeConfig[]; addresses: Map<string, string> }> {
  const names = natsServices(file);
  const parsed = names.map((name) => ({ name, conf: natsConfigOf(file, name) }));
  const listens = (conf: NatsConf): string[] => [confText(conf, 'listen'), confText(conf, 'http'), confText(confBlock(conf, 'cluster'), 'listen')];
  const ports = await freePorts(parsed.length * 3);
  const addresses = new Map<string, string>();
  parsed.forEach(({ name, conf }, i) => listens(conf).forEach((a, j) => addresses.set(`${name}:${addressOf(a).port}`, `127.0.0.1:${ports[3 * i + j]}`)));
  const local = (host: string, port: number): string => {
    const here = addresses.get(`${host}:${port}`);
    if (here === undefined) throw new Error(`${host}:${port} is no NATS service's address in docker-compose.yml`);
    return here;
  };
  const configs = parsed.map(({ name, conf }): NatsNodeConfig => {
    const jetstream: NatsConf = { ...confBlock(conf, 'jetstream'), store_dir: join(dir, name) };
    delete jetstream.sync_interval; // see above: nats-server 2.9.10 refuses it
    const cluster = confBlock(conf, 'cluster');
    const routes = (cluster.routes as string[]).map((r) => {
      const { host, port } = addressOf(r);
      return `nats-route://${local(host, port)}`;
    });
    const [client, http, route] = listens(conf).map((a) => local(name, addressOf(a).port));
    const text = JSON.stringify({ ...conf, listen: client, http, jetstream, cluster: { ...cluster, listen: route, routes } }, null, 2);
    return { name, text, port: addressOf(client!).port, httpPort: addressOf(http!).port };
  });
  return { configs, addresses };
}

/** A Vigil service's environment for a local process: NATS URLs to the local servers, port 0, `dataDir`. */
export function localVigilEnv(s: ComposeService, addresses: Map<string, string>, dataDir: string): Record<string, string> {
  const env = environmentOf(s);
  const urls = (env.VIGIL_NATS_URL ?? '').split(',').map((u) => {
    const { host, port } = addressOf(u);
    const here = addresses.get(`${host}:${port}`);
    if (here === undefined) throw new Error(`VIGIL_NATS_URL names ${u}, no NATS service of docker-compose.yml`);
    return `nats://${here}`;
  });
  return { ...env, VIGIL_NATS_URL: urls.join(','), VIGIL_HOST: '127.0.0.1', VIGIL_PORT: '0', VIGIL_DATA_DIR: dataDir };
}

/** The arguments the bench service passes to `npm run bench --`. */
export function benchArgs(s: ComposeService): string[] {
  const script = s.command?.at(-1) ?? '';
  const at = script.indexOf('npm run bench -- ');
  if (at === -1) throw new Error(`the bench service does not run npm run bench: ${script}`);
  return script.slice(at + 'npm run bench -- '.length).trim().split(/\s+/);
}
