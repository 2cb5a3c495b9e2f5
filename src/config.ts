import { hostname } from 'node:os';
import { z } from 'zod';
import { demoConfig, type DemoConfig } from './demo/config.js';
import { LOG_LEVELS, type LogLevel } from './log.js';

/** The only reader of process.env: env → typed, validated Config. */

const flag = z
  .enum(['0', '1', 'true', 'false', ''])
  .default('0')
  .transform((v) => v === '1' || v === 'true');

const schedule = z
  .string()
  .default('60,300,1800,7200,43200')
  .transform((v, ctx) => {
    // An empty entry ("60,,300", "60,") is a typo, not a zero-second delay: Number('') is 0.
    const parts = v.split(',').map((p) => (p.trim() === '' ? NaN : Number(p.trim())));
    // A week at most: a retry date must stay a valid date, and nobody waits longer for a webhook.
    if (parts.length === 0 || parts.length > 20 || parts.some((n) => !Number.isFinite(n) || n < 0 || n > 604_800)) {
      ctx.addIssue({ code: 'custom', message: 'comma-separated seconds, each from 0 to 604800 (a week), at most 20, e.g. 60,300,1800' });
      return z.NEVER;
    }
    return parts;
  });

/** `nats://h1:4222,nats://h2:4222`: one or more server URLs, comma-separated. */
const natsUrls = z
  .string()
  .min(1)
  .transform((value, ctx) => {
    const urls = value.split(',').map((s) => s.trim()).filter((s) => s !== '');
    const bad = urls.find((u) => !/^(nats|tls):\/\/[^\s/]+$/.test(u));
    if (urls.length === 0 || bad !== undefined) {
      ctx.addIssue({ code: 'custom', message: `comma-separated nats:// URLs (host:port), e.g. nats://h1:4222,nats://h2:4222${bad === undefined ? '' : `; not one: ${bad}`}` });
      return z.NEVER;
    }
    return urls;
  });

const envSchema = z.object({
  VIGIL_PORT: z.coerce.number().int().min(0).max(65535).default(8080),
  VIGIL_HOST: z.string().min(1).default('127.0.0.1'),
  VIGIL_DATA_DIR: z.string().min(1).default('./data'),
  VIGIL_BASE_URL: z.url().optional(),
  VIGIL_APP_URL: z.url().optional(),
  VIGIL_NATS_URL: natsUrls.optional(),
  VIGIL_NATS_REPLICAS: z.coerce.number().int().refine((n) => n === 1 || n === 3 || n === 5, 'replicas are 1, 3 or 5').optional(),
  VIGIL_PARTITIONS: z.coerce.number().int().min(1).max(4096).default(64),
  VIGIL_LEASE_SECONDS: z.coerce.number().int().min(1).max(300).default(5),
  VIGIL_NODE_URL: z.url().refine((u) => /^https?:\/\//.test(u), 'an http:// or https:// URL').optional(),
  VIGIL_NODE_ID: z.string().regex(/^[A-Za-z0-9_-]{1,64}$/, 'letters, digits, - and _ (at most 64)').optional(),
  VIGIL_DEMO: flag,
  VIGIL_PUBLIC_RATE_LIMIT: z.coerce.number().int().min(1).default(60),
  VIGIL_KEY_RATE_LIMIT: z.coerce.number().int().min(0).default(0),
  VIGIL_MAX_PENDING: z.coerce.number().int().min(1).default(10_000),
  VIGIL_WRITER_MAX_BATCH: z.coerce.number().int().min(1).max(100_000).default(128),
  VIGIL_STREAM_MAX_FRAMES: z.coerce.number().int().min(1).max(10_000).default(64),
  // uWebSockets.js takes idle timeouts of 8–960 s in steps of 4.
  VIGIL_STREAM_IDLE_SECONDS: z.coerce.number().int().min(8).max(960).multipleOf(4).default(120),
  VIGIL_DURABILITY: z.enum(['sync', 'process']).default('sync'),
  VIGIL_LOG_KEY: z.string().min(1).optional(),
  VIGIL_LOG_LEVEL: z.enum(LOG_LEVELS).default('info'),
  VIGIL_CHECKPOINT_SECONDS: z.coerce.number().int().min(1).default(60),
  VIGIL_TREE_CACHE_MB: z.coerce.number().int().min(0).max(1_048_576).default(128),
  VIGIL_MIN_FREE_MB: z.coerce.number().min(0).max(1_048_576).default(64),
  VIGIL_STRICT_AUDIT: flag,
  VIGIL_METRICS_TOKEN: z.string().min(16, 'at least 16 characters (it guards GET /metrics; e.g. openssl rand -hex 32)').regex(/^\S+$/, 'no spaces').optional(),
  VIGIL_METRICS_ORG_LABELS: flag,
  VIGIL_WEBHOOK_RETRY_SCHEDULE: schedule,
  VIGIL_WEBHOOK_ALLOW_PRIVATE: flag,
  // Decimals allowed (0.5: twelve hours); a year at most.
  VIGIL_WEBHOOK_DISABLE_DAYS: z.coerce.number().positive('more than 0 days').max(365, 'at most 365 days').default(5),
  VIGIL_BOOTSTRAP_ORG: z.string().min(1).optional(),
  VIGIL_BOOTSTRAP_KEY: z.string().min(1).optional(),
});

/** The variables loadConfig reads (demo mode's VIGIL_LLM_* are read by demo/config.ts); others are ignored. */
export const CONFIG_VARIABLES: readonly string[] = Object.keys(envSchema.shape);

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  /** `http://{host}:{port}` with VIGIL_BASE_URL unset; the runtime hands on withBoundPort's copy, so no URL says port 0. */
  baseUrl: string;
  appUrl: string;
  /** VIGIL_BASE_URL and VIGIL_APP_URL as set; an unset one follows the port actually bound. */
  urls: { base: string | undefined; app: string | undefined };
  /** Cluster mode (DESIGN §8) when set: the NATS servers to connect to, and how the cluster is cut. */
  cluster: ClusterConfig | undefined;
  demo: boolean;
  /** Demo mode's OpenAI-compatible provider (VIGIL_LLM_*), read only in demo mode; null: the built-in generator. */
  llm: DemoConfig['llm'];
  publicRateLimitPerMinute: number;
  /** Requests a second per API key; 0 turns the limit off. */
  keyRateLimitPerSecond: number;
  /** Frames of one `GET /events/stream` connection taken and not yet answered; past it, `overloaded`. */
  streamMaxFrames: number;
  /** Seconds a `GET /events/stream` connection may be silent before it is pinged; a peer that does not answer is closed after as long again. */
  streamIdleSeconds: number;
  maxPendingPerOrg: number;
  /** The most commands one org's batch (one append) takes; see OrgLedgerActor. */
  writerMaxBatch: number;
  durability: 'sync' | 'process';
  logLevel: LogLevel;
  /** How often in-memory state is checkpointed (bounds the replay after a crash). */
  checkpointSeconds: number;
  /** Memory for the Merkle trees' stripe cache (levels 0–3, read by proofs), in bytes (VIGIL_TREE_CACHE_MB). */
  treeCacheBytes: number;
  /** Writes are refused (503) while the data dir's disk has less free than this, in bytes (VIGIL_MIN_FREE_MB; 0: never). */
  minFreeBytes: number;
  /** VIGIL_STRICT_AUDIT: audit routes need an audit:read or admin key (least privilege), not any key. */
  strictAudit: boolean;
  /**
   * GET /metrics (DESIGN §11): served only when VIGIL_METRICS_TOKEN is set, to that token as Bearer;
   * null otherwise (nothing is counted then). `orgLabels` (VIGIL_METRICS_ORG_LABELS) adds org names.
   */
  metrics: { token: string; orgLabels: boolean } | null;
  /** The transparency log's Ed25519 key (a PKCS#8 PEM file); absent: `log-key.pem` in the data dir, made on first start. */
  logKeyPath: string | undefined;
  webhookRetrySchedule: number[];
  webhookAllowPrivate: boolean;
  /** A webhook failing every attempt for this many days is deactivated (DESIGN §11). */
  webhookDisableDays: number;
  bootstrap: { org: string; key: string } | undefined;
}

export interface ClusterConfig {
  servers: string[];
  /** Replicas of the ledger stream and KV buckets; unset: 3, or 1 on a one-server NATS. */
  replicas: number | undefined;
  /** Partitions the orgs hash to; fixed for the cluster's life (the first node stores it). */
  partitions: number;
  leaseSeconds: number;
  /** This node's name (VIGIL_NODE_ID, else the host name), shown by /health. */
  node: string;
  /**
   * Where clients reach this node itself (VIGIL_NODE_URL), named in the partition map; unset: the
   * base URL (VIGIL_BASE_URL, else the address bound).
   */
  url: string | undefined;
}

export class ConfigError extends Error {
  override name = 'ConfigError';
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env): Config {
  // An empty variable means "not set", as in most shells' `VAR= cmd`.
  const present = Object.fromEntries(Object.entries(env).filter(([, v]) => v !== undefined && v !== ''));
  const parsed = envSchema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const e = parsed.data;
  if ((e.VIGIL_BOOTSTRAP_ORG === undefined) !== (e.VIGIL_BOOTSTRAP_KEY === undefined)) {
    throw new ConfigError('invalid configuration: VIGIL_BOOTSTRAP_ORG and VIGIL_BOOTSTRAP_KEY go together');
  }
  const urls = { base: e.VIGIL_BASE_URL?.replace(/\/+$/, ''), app: e.VIGIL_APP_URL?.replace(/\/+$/, '') };
  const baseUrl = urls.base ?? localUrl(e.VIGIL_HOST, e.VIGIL_PORT);
  return {
    port: e.VIGIL_PORT,
    host: e.VIGIL_HOST,
    dataDir: e.VIGIL_DATA_DIR,
    baseUrl,
    appUrl: urls.app ?? baseUrl,
    urls,
    cluster:
      e.VIGIL_NATS_URL === undefined
        ? undefined
        : {
            servers: e.VIGIL_NATS_URL,
            replicas: e.VIGIL_NATS_REPLICAS,
            partitions: e.VIGIL_PARTITIONS,
            leaseSeconds: e.VIGIL_LEASE_SECONDS,
            node: e.VIGIL_NODE_ID ?? hostname(),
            url: e.VIGIL_NODE_URL?.replace(/\/+$/, ''),
          },
    demo: e.VIGIL_DEMO,
    llm: e.VIGIL_DEMO ? demoConfig(env).llm : null,
    publicRateLimitPerMinute: e.VIGIL_PUBLIC_RATE_LIMIT,
    keyRateLimitPerSecond: e.VIGIL_KEY_RATE_LIMIT,
    maxPendingPerOrg: e.VIGIL_MAX_PENDING,
    writerMaxBatch: e.VIGIL_WRITER_MAX_BATCH,
    streamMaxFrames: e.VIGIL_STREAM_MAX_FRAMES,
    streamIdleSeconds: e.VIGIL_STREAM_IDLE_SECONDS,
    durability: e.VIGIL_DURABILITY,
    logLevel: e.VIGIL_LOG_LEVEL,
    checkpointSeconds: e.VIGIL_CHECKPOINT_SECONDS,
    treeCacheBytes: e.VIGIL_TREE_CACHE_MB * 1024 * 1024,
    minFreeBytes: Math.round(e.VIGIL_MIN_FREE_MB * 1024 * 1024),
    strictAudit: e.VIGIL_STRICT_AUDIT,
    metrics: e.VIGIL_METRICS_TOKEN === undefined ? null : { token: e.VIGIL_METRICS_TOKEN, orgLabels: e.VIGIL_METRICS_ORG_LABELS },
    logKeyPath: e.VIGIL_LOG_KEY,
    webhookRetrySchedule: e.VIGIL_WEBHOOK_RETRY_SCHEDULE,
    webhookAllowPrivate: e.VIGIL_WEBHOOK_ALLOW_PRIVATE,
    webhookDisableDays: e.VIGIL_WEBHOOK_DISABLE_DAYS,
    bootstrap:
      e.VIGIL_BOOTSTRAP_ORG !== undefined && e.VIGIL_BOOTSTRAP_KEY !== undefined
        ? { org: e.VIGIL_BOOTSTRAP_ORG, key: e.VIGIL_BOOTSTRAP_KEY }
        : undefined,
  };
}

/** The config once the server listens on `port`: with VIGIL_PORT=0, unset URLs name the real port, not 0. */
export function withBoundPort(config: Config, port: number): Config {
  const baseUrl = config.urls.base ?? localUrl(config.host, port);
  return { ...config, port, baseUrl, appUrl: config.urls.app ?? baseUrl };
}

function localUrl(host: string, port: number): string {
  return `http://${host}:${port}`;
}
