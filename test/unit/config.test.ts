import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, withBoundPort } from '../../src/config.js';

describe('loadConfig', () => {
  it('applies the documented defaults to an empty environment', () => {
    const config = loadConfig({});
    expect(config).toMatchObject({
      port: 8080,
      host: '127.0.0.1',
      dataDir: './data',
      durability: 'sync',
      publicRateLimitPerMinute: 60,
      webhookRetrySchedule: [60, 300, 1800, 7200, 43200],
      baseUrl: 'http://127.0.0.1:8080',
      appUrl: 'http://127.0.0.1:8080',
      demo: false,
      webhookAllowPrivate: false,
      keyRateLimitPerSecond: 0,
      maxPendingPerOrg: 10_000,
      writerMaxBatch: 128,
      streamMaxFrames: 64,
      streamIdleSeconds: 120,
      treeCacheBytes: 128 * 1024 * 1024,
      minFreeBytes: 64 * 1024 * 1024,
      strictAudit: false,
      metrics: null,
      cluster: undefined,
      bootstrap: undefined,
    });
  });

  it('reads the environment object it is given, not process.env', () => {
    const saved = process.env.VIGIL_PORT;
    process.env.VIGIL_PORT = '9999';
    try {
      expect(loadConfig({}).port).toBe(8080);
    } finally {
      if (saved === undefined) delete process.env.VIGIL_PORT;
      else process.env.VIGIL_PORT = saved;
    }
  });

  it('parses values from the environment', () => {
    const config = loadConfig({
      VIGIL_PORT: '9090',
      VIGIL_HOST: '0.0.0.0',
      VIGIL_DATA_DIR: '/var/lib/vigil',
      VIGIL_DURABILITY: 'process',
      VIGIL_PUBLIC_RATE_LIMIT: '5',
      VIGIL_WEBHOOK_RETRY_SCHEDULE: '1, 2,3',
      VIGIL_DEMO: 'true',
      VIGIL_WEBHOOK_ALLOW_PRIVATE: '1',
      VIGIL_TREE_CACHE_MB: '0',
      VIGIL_MIN_FREE_MB: '0.5',
      VIGIL_STRICT_AUDIT: '1',
    });
    expect(config).toMatchObject({
      port: 9090,
      host: '0.0.0.0',
      dataDir: '/var/lib/vigil',
      durability: 'process',
      publicRateLimitPerMinute: 5,
      webhookRetrySchedule: [1, 2, 3],
      demo: true,
      webhookAllowPrivate: true,
      treeCacheBytes: 0,
      minFreeBytes: 512 * 1024,
      strictAudit: true,
      baseUrl: 'http://0.0.0.0:9090',
    });
  });

  it('turns GET /metrics on with VIGIL_METRICS_TOKEN (16 characters at least, no spaces), org labels with VIGIL_METRICS_ORG_LABELS', () => {
    expect(loadConfig({ VIGIL_METRICS_TOKEN: 'a'.repeat(16) }).metrics).toEqual({ token: 'a'.repeat(16), orgLabels: false });
    expect(loadConfig({ VIGIL_METRICS_TOKEN: 'a'.repeat(16), VIGIL_METRICS_ORG_LABELS: '1' }).metrics).toEqual({ token: 'a'.repeat(16), orgLabels: true });
    // Org labels alone turn nothing on.
    expect(loadConfig({ VIGIL_METRICS_ORG_LABELS: '1' }).metrics).toBeNull();
    for (const token of ['short', 'sixteen chars  x with spaces']) {
      expect(() => loadConfig({ VIGIL_METRICS_TOKEN: token }), token).toThrow(/VIGIL_METRICS_TOKEN/);
    }
  });

  it('reads cluster mode from VIGIL_NATS_URL, with the DESIGN §8 defaults', () => {
    const config = loadConfig({ VIGIL_NATS_URL: 'nats://h1:4222, nats://h2:4222', VIGIL_NODE_ID: 'node-a' });
    expect(config.cluster).toEqual({ servers: ['nats://h1:4222', 'nats://h2:4222'], replicas: undefined, partitions: 64, leaseSeconds: 5, node: 'node-a', url: undefined });
    const set = loadConfig({ VIGIL_NATS_URL: 'nats://h1:4222', VIGIL_NATS_REPLICAS: '1', VIGIL_PARTITIONS: '16', VIGIL_LEASE_SECONDS: '2', VIGIL_NODE_URL: 'http://10.0.0.7:8080/' });
    expect(set.cluster).toMatchObject({ replicas: 1, partitions: 16, leaseSeconds: 2, url: 'http://10.0.0.7:8080' });
    expect(typeof set.cluster?.node).toBe('string');
  });

  it.each([
    ['VIGIL_NATS_URL', 'http://h1:4222'],
    ['VIGIL_NATS_URL', ' , '],
    ['VIGIL_NATS_REPLICAS', '2'],
    ['VIGIL_PARTITIONS', '0'],
    ['VIGIL_LEASE_SECONDS', '0'],
    ['VIGIL_NODE_ID', 'a b'],
    ['VIGIL_NODE_URL', 'nats://h1:4222'],
    ['VIGIL_NODE_URL', 'not a url'],
  ])('refuses %s=%j with a message naming it', (name, value) => {
    expect(() => loadConfig({ VIGIL_NATS_URL: 'nats://h1:4222', [name]: value })).toThrow(new RegExp(name));
  });

  it('reads VIGIL_WRITER_MAX_BATCH (1 to 100000) and refuses anything else, naming it', () => {
    expect(loadConfig({ VIGIL_WRITER_MAX_BATCH: '1000' }).writerMaxBatch).toBe(1000);
    for (const value of ['0', '1.5', '100001', 'many']) expect(() => loadConfig({ VIGIL_WRITER_MAX_BATCH: value }), value).toThrow(/VIGIL_WRITER_MAX_BATCH/);
  });

  it('strips trailing slashes from VIGIL_BASE_URL and uses it as the default app URL', () => {
    const config = loadConfig({ VIGIL_BASE_URL: 'https://vigil.example.com//' });
    expect(config.baseUrl).toBe('https://vigil.example.com');
    expect(config.appUrl).toBe('https://vigil.example.com');
    expect(loadConfig({ VIGIL_BASE_URL: 'https://a.example', VIGIL_APP_URL: 'https://b.example/' }).appUrl).toBe('https://b.example');
  });

  it('points unset URLs at the port actually bound, and leaves set ones alone', () => {
    const derived = withBoundPort(loadConfig({ VIGIL_PORT: '0' }), 41234);
    expect(derived).toMatchObject({ port: 41234, baseUrl: 'http://127.0.0.1:41234', appUrl: 'http://127.0.0.1:41234' });
    const app = withBoundPort(loadConfig({ VIGIL_PORT: '0', VIGIL_APP_URL: 'https://app.example/' }), 41234);
    expect(app).toMatchObject({ baseUrl: 'http://127.0.0.1:41234', appUrl: 'https://app.example' });
    const both = withBoundPort(loadConfig({ VIGIL_PORT: '0', VIGIL_BASE_URL: 'https://api.example' }), 41234);
    expect(both).toMatchObject({ baseUrl: 'https://api.example', appUrl: 'https://api.example' });
  });

  for (const port of ['abc', '70000', '-1', '80.5']) {
    it(`rejects VIGIL_PORT=${JSON.stringify(port)} with a ConfigError`, () => {
      expect(() => loadConfig({ VIGIL_PORT: port })).toThrow(ConfigError);
      expect(() => loadConfig({ VIGIL_PORT: port })).toThrow(/VIGIL_PORT/);
    });
  }

  it('rejects other invalid values with a ConfigError', () => {
    for (const env of [
      { VIGIL_DURABILITY: 'fsync' },
      { VIGIL_PUBLIC_RATE_LIMIT: '0' },
      { VIGIL_DEMO: 'yes' },
      { VIGIL_BASE_URL: 'not a url' },
      { VIGIL_WEBHOOK_RETRY_SCHEDULE: '60,soon' },
      { VIGIL_WEBHOOK_RETRY_SCHEDULE: '60,-5' },
      { VIGIL_WEBHOOK_RETRY_SCHEDULE: '60,,300' },
      { VIGIL_WEBHOOK_RETRY_SCHEDULE: '60,' },
      { VIGIL_WEBHOOK_RETRY_SCHEDULE: '60,1e13' },
      { VIGIL_STREAM_IDLE_SECONDS: '4' },
      { VIGIL_STREAM_IDLE_SECONDS: '10' },
      { VIGIL_STREAM_IDLE_SECONDS: '1000' },
      { VIGIL_TREE_CACHE_MB: '-1' },
      { VIGIL_TREE_CACHE_MB: '1.5' },
      { VIGIL_MIN_FREE_MB: '-1' },
      { VIGIL_MIN_FREE_MB: 'lots' },
    ]) {
      expect(() => loadConfig(env), JSON.stringify(env)).toThrow(ConfigError);
    }
  });

  it('requires VIGIL_BOOTSTRAP_ORG and VIGIL_BOOTSTRAP_KEY together', () => {
    expect(() => loadConfig({ VIGIL_BOOTSTRAP_ORG: 'acme' })).toThrow(ConfigError);
    expect(() => loadConfig({ VIGIL_BOOTSTRAP_KEY: 'vgl_secret' })).toThrow(ConfigError);
    expect(loadConfig({ VIGIL_BOOTSTRAP_ORG: 'acme', VIGIL_BOOTSTRAP_KEY: 'vgl_secret' }).bootstrap).toEqual({
      org: 'acme',
      key: 'vgl_secret',
    });
  });

  it('ConfigError is an Error named ConfigError', () => {
    try {
      loadConfig({ VIGIL_PORT: 'abc' });
      expect.unreachable('loadConfig should have thrown');
    } catch (error) {
      expect(error).toBeInstanceOf(Error);
      expect((error as Error).name).toBe('ConfigError');
    }
  });
});

describe('empty variables', () => {
  it('treats an empty variable as unset', () => {
    const config = loadConfig({ VIGIL_PORT: '', VIGIL_WEBHOOK_RETRY_SCHEDULE: '' });
    expect(config.port).toBe(8080);
    expect(config.webhookRetrySchedule).toEqual([60, 300, 1800, 7200, 43200]);
  });
});
