import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import { Gate } from './domain/scoring.js';

/** What the gauges read when scraped. */
export interface MetricSources {
  /** Commands waiting in or in flight from each org writer of this node. */
  writerDepths(): Iterable<[org: string, depth: number]>;
  /** Webhook deliveries waiting for an attempt on this node. */
  deliveriesQueued(): number;
  /** Cluster mode: ledger stream messages this node's replica has yet to apply. */
  replicationLag?: (() => Promise<number>) | undefined;
  /** Cluster mode: commands this node sent to another node's writer (the org is not its own). */
  forwardedCommands?: (() => number) | undefined;
}

const GATES = [...Gate, 'refused'] as const;
const OUTCOMES = ['delivered', 'retry', 'dead', 'cancelled'] as const;
const SECONDS = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];
const SIZES = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1000, 5000];

/**
 * The service's Prometheus metrics (DESIGN §11), kept by prom-client in one registry per runtime
 * (tests run several in one process) and served by `GET /metrics` when VIGIL_METRICS_TOKEN is set.
 * Without the token none is made and nothing is counted: the hot paths test for null.
 *
 * No label names an org unless VIGIL_METRICS_ORG_LABELS=1 (`orgLabels`): a slug may be a
 * customer's name, and a series per org grows without bound. Routes are labelled by their
 * template (`/public/agents/:org/:agent`), never by the path asked for.
 */
export class Metrics {
  readonly registry = new Registry();
  readonly orgLabels: boolean;
  readonly requests: Counter<'method' | 'route' | 'status'>;
  readonly requestSeconds: Histogram<'method' | 'route' | 'status'>;
  private readonly ingestBatch: Histogram<'transport'>;
  private readonly events: Counter<'gate' | 'org'>;
  private readonly refused: Counter<'code' | 'org'>;
  private readonly commitSeconds: Histogram;
  private readonly commitRecords: Histogram;
  private readonly deliveries: Counter<'outcome'>;

  constructor(sources: MetricSources, options: { orgLabels?: boolean } = {}) {
    const registers = [this.registry];
    const orgLabels = (this.orgLabels = options.orgLabels === true);
    collectDefaultMetrics({ register: this.registry });
    const route = ['method', 'route', 'status'] as const;
    this.requests = new Counter({ name: 'vigil_http_requests_total', help: 'HTTP requests answered, by method, route template and status.', labelNames: route, registers });
    this.requestSeconds = new Histogram({
      name: 'vigil_http_request_duration_seconds',
      help: 'From a request being routed to its answer being written, by method, route template and status.',
      labelNames: route,
      buckets: SECONDS,
      registers,
    });
    this.ingestBatch = new Histogram({
      name: 'vigil_ingest_batch_events',
      help: 'Events per ingest call, by transport: http (1 for POST /events, the batch size for /events/batch) or stream (a frame).',
      labelNames: ['transport'],
      buckets: SIZES,
      registers,
    });
    this.events = new Counter({
      name: 'vigil_ingest_events_total',
      help: 'Events ingested, by gate decision (pass, hold, alert, collapse), or `refused` when the event got an error.',
      labelNames: orgLabels ? ['gate', 'org'] : ['gate'],
      registers,
    });
    this.refused = new Counter({
      name: 'vigil_ingest_refused_total',
      help: 'Events answered with an error, by its code (validation_failed, quota_exceeded, overloaded, unavailable, …), whatever the transport: a batch or a stream frame answers 200 with per-event errors.',
      labelNames: orgLabels ? ['code', 'org'] : ['code'],
      registers,
    });
    this.commitSeconds = new Histogram({
      name: 'vigil_ledger_commit_seconds',
      help: 'From an org writer\'s batch leaving its queue to the ledger acknowledging it durable.',
      buckets: SECONDS,
      registers,
    });
    this.commitRecords = new Histogram({ name: 'vigil_ledger_commit_records', help: 'Ledger records per commit (one org writer batch).', buckets: SIZES, registers });
    this.deliveries = new Counter({
      name: 'vigil_webhook_deliveries_total',
      help: 'Webhook delivery attempts by outcome: delivered; retry (failed, another attempt scheduled); dead (failed, none left); cancelled (the webhook was deactivated).',
      labelNames: ['outcome'],
      registers,
    });
    // At 0 from the start, so that increase() and rate() see the first of each.
    if (!orgLabels) for (const gate of GATES) this.events.inc({ gate }, 0);
    for (const outcome of OUTCOMES) this.deliveries.inc({ outcome }, 0);
    new Gauge({
      name: 'vigil_writer_queue_depth',
      help: orgLabels
        ? 'Commands waiting in or in flight from an org writer of this node, by org.'
        : 'Commands waiting in or in flight from the org writers of this node, summed over orgs.',
      labelNames: orgLabels ? ['org'] : [],
      registers,
      collect() {
        this.reset();
        let total = 0;
        for (const [org, depth] of sources.writerDepths()) {
          if (orgLabels) this.set({ org }, depth);
          total += depth;
        }
        if (!orgLabels) this.set(total);
      },
    });
    new Gauge({
      name: 'vigil_writer_queue_depth_max',
      help: 'The deepest org writer queue of this node (commands waiting and in flight).',
      registers,
      collect() {
        let max = 0;
        for (const [, depth] of sources.writerDepths()) max = Math.max(max, depth);
        this.set(max);
      },
    });
    new Gauge({
      name: 'vigil_webhook_deliveries_queued',
      help: 'Webhook deliveries waiting for an attempt on this node.',
      registers,
      collect() {
        this.set(sources.deliveriesQueued());
      },
    });
    const forwarded = sources.forwardedCommands;
    if (forwarded !== undefined) {
      new Counter({
        name: 'vigil_commands_forwarded_total',
        help: 'Cluster mode: commands (a request, a slice of up to 128 events of a batch or frame, a forwarded keyed read) this node sent to the node owning the org, not its own writer. Owner-aware clients keep it near 0.',
        registers,
        collect() {
          this.reset();
          this.inc(forwarded());
        },
      });
    }
    const lag = sources.replicationLag;
    if (lag !== undefined) {
      new Gauge({
        name: 'vigil_replication_lag_messages',
        help: 'Cluster mode: stream messages left to read of the partitions this node is reading now (a partition gained; 0: none).',
        registers,
        async collect() {
          this.set(await lag());
        },
      });
    }
  }

  /** One ingest call of `events` events over `transport`. */
  ingestCall(transport: 'http' | 'stream', events: number): void {
    this.ingestBatch.observe({ transport }, events);
  }

  /** An event's outcome: its gate decision, or `refused` with the error's code. */
  ingested(org: string, gate: (typeof GATES)[number], code?: string): void {
    if (this.orgLabels) this.events.inc({ gate, org });
    else this.events.inc({ gate });
    if (gate !== 'refused') return;
    if (this.orgLabels) this.refused.inc({ code: code ?? 'internal', org });
    else this.refused.inc({ code: code ?? 'internal' });
  }

  /** A writer batch of `records` records made durable `seconds` after it left the queue. */
  committed(records: number, seconds: number): void {
    this.commitSeconds.observe(seconds);
    this.commitRecords.observe(records);
  }

  /** A webhook delivery attempt's outcome. */
  delivery(outcome: (typeof OUTCOMES)[number]): void {
    this.deliveries.inc({ outcome });
  }

  /** The text a scrape gets, and its content type. */
  async scrape(): Promise<{ text: string; contentType: string }> {
    return { text: await this.registry.metrics(), contentType: this.registry.contentType };
  }
}
