import type { DeliveryRetryCommand, NotOwner, ReplyTo } from '../bus/messages.js';
import type { LedgerRow } from '../domain/ledger.js';
import type { Lookup } from '../net/receiver-address.js';
import type { PostOptions, PostResult } from '../net/webhook-sender.js';
import type { DeliveryRecord, WebhookRecord, WebhookStore } from '../store/webhook-store.js';
import { DeliveryMaker } from './delivery-maker.js';
import { afterAttempt } from './delivery-outcome.js';
import { DeliveryOwnership } from './delivery-ownership.js';
import { DeliveryScheduler, type AttemptOutcome, type DeliveryBounds } from './delivery-scheduler.js';
import type { DeliveryScope } from './delivery-scope.js';
import { isDelivered, isGone, pingWebhook, sendSigned, type PingResult } from './delivery-send.js';
import { DeliveryWriter } from './delivery-writer.js';
import { WebhookHealth } from './webhook-health.js';
import type { WebhookRegistry } from '../services/webhook-registry.js';
import type { Logger } from '../log.js';

export interface DeliveryOptions {
  /**
   * Seconds to wait after the k-th failure: entry min(k, length) (JetStream consumer backoff); at
   * most six attempts whatever its length.
   */
  schedule: readonly number[];
  allowPrivate: boolean;
  /** Bound on one attempt, connect to response. */
  timeoutMs: number;
  /** Attempts in flight at once: in all, per org, per webhook (see DeliveryScheduler). */
  bounds: DeliveryBounds;
  policyDigest: string;
  now: () => number;
  newId: () => string;
  lookup?: Lookup;
  /** The HTTP client (tests may wrap it to observe attempts; the default posts for real). */
  post?: (options: PostOptions) => Promise<PostResult>;
  log: Logger;
  /** Backoff between rewrites after a failed delivery write (ms); tests shorten it. */
  storeRetry?: { firstMs: number; maxMs: number };
  /** Told each attempt's outcome (GET /metrics). */
  attempted?: ((outcome: 'delivered' | 'retry' | 'dead' | 'cancelled') => void) | undefined;
  /** Cluster mode: this node makes, stores and sends the deliveries of the orgs it owns only (DeliveryOwnership). */
  scope?: DeliveryScope;
  /** A webhook whose attempts have all failed for this many days is deactivated (VIGIL_WEBHOOK_DISABLE_DAYS). */
  disableDays: number;
  /** In [0, 1): the jitter on a wait a receiver's Retry-After asked for. Math.random by default. */
  random?: () => number;
}

const NOT_OWNER: NotOwner = { ok: false, code: 'not_owner', message: 'this node does not send the org\'s deliveries' };

/**
 * Turns committed gate and review records into webhook deliveries and drives them to delivered
 * or dead.
 *
 * Durable before the answer: the ledger record that causes a delivery is durable before the
 * client is answered, and deliveries are a function of it. They are written with the org's
 * delivery cursor (the last seq turned into deliveries) in one transaction, and a start replays
 * the ledger after the cursor, so a crash between the answer and that write loses nothing and
 * makes nothing twice. The triggering request waits for that write; if it fails the request is
 * still answered 200, because the ledger record is already committed (refusing it would tell the
 * client nothing was recorded, and its retry would record the event twice). The deliveries are
 * then held in memory and rewritten until stored, and the cursor stays behind them meanwhile, so a
 * restart makes them again (see DeliveryWriter).
 *
 * Each attempt's outcome is written before the next attempt is scheduled, so the stored attempt
 * count never trails what was sent by more than the attempt in flight; an outcome whose write
 * failed is held and rewritten, and the delivery is scheduled again once it is stored. An attempt
 * cut short by a crash is made again after the restart (at least once; the X-Vigil-Delivery id
 * lets receivers drop duplicates).
 *
 * A receiver answering 410 Gone, or one whose every attempt failed for `disableDays`, has its
 * webhook deactivated (with a log line); the org's other active webhooks are sent a
 * `webhook.disabled` notice, stored and retried like any delivery (not billed).
 *
 * Attempts share a pool fairly (DeliveryScheduler): orgs round robin, an org's webhooks round
 * robin, bounds per org and per webhook, and a slow lane for webhooks whose last attempt failed,
 * so slow receivers cannot hold up the others.
 *
 * Cluster mode (`scope`): the same, per org, on the org's owner only; an org that changes hands is
 * taken over from the shared store (DeliveryOwnership). An attempt whose org changed hands while
 * it was out is not recorded: the new owner makes it again, with the same delivery id.
 */
export class DeliveryActor {
  /** The queued deliveries, and the slots of the attempts in flight. */
  private readonly queued: DeliveryScheduler;
  private nextId: number;
  private readonly writer: DeliveryWriter;
  private readonly maker: DeliveryMaker;
  private readonly health: WebhookHealth;
  private readonly owned: DeliveryOwnership | null = null;
  private readonly attempts = new Set<Promise<void>>();
  /** The deliveries whose attempt is out, by id, each with its attempt's own token. */
  private readonly sending = new Map<number, object>();
  private timer: NodeJS.Timeout | null = null;
  private timerAt = Infinity;
  private running = false;

  constructor(
    private readonly store: WebhookStore,
    private readonly webhooks: WebhookRegistry,
    private readonly options: DeliveryOptions,
  ) {
    this.nextId = options.scope === undefined ? store.lastDeliveryId() + 1 : 0;
    this.queued = new DeliveryScheduler(options.bounds);
    this.maker = new DeliveryMaker(webhooks, options);
    this.writer = new DeliveryWriter(store, {
      onStored: (records) => {
        for (const d of records) if (d.status === 'queued') this.queued.add(d);
        this.pump();
      },
      onRefused: (orgs) => this.owned?.refused(orgs),
      log: options.log,
      ...(options.storeRetry === undefined ? {} : { retry: options.storeRetry }),
    });
    this.health = new WebhookHealth(webhooks, this.writer, { cancel: (w) => this.cancel(w), newIds: (org, n) => this.newIds(org, n) }, options);
    if (options.scope !== undefined) {
      const queue = {
        enqueue: (records: readonly DeliveryRecord[]) => {
          for (const d of records) this.queued.add(d);
          this.pump();
        },
        drop: (org: string) => void this.queued.dropOrg(org),
      };
      this.owned = new DeliveryOwnership(options.scope, store, webhooks, this.writer, this.maker, queue, options.log);
      // After the registry's own watch (it was made first): a deactivation cancels what waits here.
      store.watchWebhooks?.((webhook) => {
        if (!webhook.active) void this.cancel(webhook);
        else this.owned?.noticed(webhook.org);
      });
    }
  }

  /** Cluster mode: partitions gained; takes over their orgs' deliveries. */
  take(which: (org: string) => boolean): void {
    this.owned?.take(which);
  }

  /** Cluster mode: partitions lost; stops sending their orgs' deliveries at once. */
  release(which: (org: string) => boolean): void {
    this.owned?.release(which);
  }

  /** Deliveries waiting for an attempt on this node. */
  get waiting(): number {
    return this.queued.size;
  }

  /** Per org, the seq up to which the ledger was already turned into stored deliveries. */
  cursors(): ReadonlyMap<string, number> {
    return this.writer.cursors();
  }

  /**
   * Moves an org's cursor past rows replayed without this actor (a partitioned start-up replay)
   * when it has no active webhook, so they make no deliveries. False otherwise: those rows must
   * then come through onCommitted.
   */
  skipTo(org: string, seq: number): boolean {
    // Cluster mode: the cursor is the owner's to move, as it takes the org over.
    if (this.owned !== null || this.webhooks.hasActive(org)) return false;
    this.writer.made(org, seq, []);
    return true;
  }

  /** Starts sending: what was queued before a restart resumes on its schedule (cluster mode: as orgs are taken over). */
  start(): void {
    if (this.owned === null) for (const d of this.store.queuedDeliveries()) this.queued.add(d);
    this.running = true;
    this.pump();
  }

  /** Makes the deliveries of committed rows; the promise settles once their write is done (stored, or held for a rewrite). */
  readonly onCommitted = (org: string, rows: readonly LedgerRow[]): Promise<unknown> | undefined => {
    const last = rows[rows.length - 1];
    if (last === undefined) return undefined;
    if (this.owned !== null) return this.owned.committed(org, rows);
    if (!this.webhooks.hasActive(org)) {
      this.writer.made(org, last.seq, []);
      return undefined;
    }
    const planned = this.maker.plan(org, rows);
    const made = this.maker.build(planned, this.nextId);
    this.nextId += made.length;
    this.writer.made(org, last.seq, made);
    return made.length === 0 ? undefined : this.writer.flush();
  };

  /**
   * Cluster mode: a batch this node's copy of the ledger received. The org's owner makes its
   * deliveries here if its writer has not (it appended them elsewhere, or died before storing them).
   */
  onReplicated(org: string, rows: readonly LedgerRow[]): void {
    void this.owned?.committed(org, rows);
  }

  /** Saves the cursor of every org that moved, and anything still held (with checkpoints and on stop). */
  saveCursors(): Promise<void> {
    return this.writer.flush(true);
  }

  /** Cancels a deactivated webhook's queued deliveries. */
  cancel(webhook: WebhookRecord): Promise<void> {
    for (const d of this.queued.dropWebhook(webhook.org, webhook.id)) {
      this.writer.changedRecord({ ...d, status: 'cancelled', last_error: d.last_error ?? 'webhook deactivated' });
    }
    return this.writer.flush();
  }

  /**
   * Re-queues a dead delivery for one more attempt now (a failure leaves it dead again); a queued
   * one is answered as it is. On the
   * node that sends the org's deliveries only (cluster mode: its owner; others answer not_owner).
   */
  async retry(command: DeliveryRetryCommand, abandoned?: { readonly aborted: boolean }): Promise<ReplyTo<DeliveryRetryCommand> | NotOwner> {
    const { org, webhookId, deliveryId } = command;
    const epoch = this.owned === null ? undefined : await this.owned.hold(org);
    if (epoch === null) return NOT_OWNER;
    let webhook = this.webhooks.get(org, webhookId);
    // Cluster mode: a webhook made on another node a moment ago may not have reached this one yet.
    if (webhook === undefined && this.options.scope !== undefined) {
      await this.options.scope.caughtUp(org);
      webhook = this.webhooks.get(org, webhookId);
    }
    if (webhook === undefined) return { ok: false, code: 'not_found', message: `webhook ${webhookId} not found` };
    let d = this.store.getDelivery(org, webhookId, deliveryId);
    if (d === undefined) return { ok: false, code: 'not_found', message: `delivery ${deliveryId} of webhook ${webhookId} not found` };
    if (this.writer.holds(d.id)) {
      // A change of it is being written (an attempt's outcome, or a retry asked a moment ago), and
      // readers may already see it: decide on what the write leaves.
      await this.writer.settled();
      d = this.store.getDelivery(org, webhookId, deliveryId) ?? d;
      if (this.writer.holds(d.id)) return { ok: false, code: 'unavailable', message: `delivery ${deliveryId}: its last change is still being written; try again in a moment` };
    }
    // Its caller gone, or past its deadline (cluster mode) after the waits above: decided by nobody.
    if (abandoned?.aborted === true) return { ok: false, code: 'unavailable', message: 'the caller was gone, or the command\'s deadline passed, before it was decided; nothing was changed' };
    // Queued here, or its attempt out: answered as it is, as if asked twice.
    const known = this.queued.get(d.id);
    if (known !== undefined) return { ok: true, value: known };
    if (this.sending.has(d.id)) return { ok: true, value: { ...d, status: 'queued' } };
    if (d.status === 'queued') {
      // Stored as queued but scheduled nowhere here (a retry stored as the org changed hands): sent now.
      this.queued.add(d);
      this.pump();
      return { ok: true, value: d };
    }
    if (!webhook.active) return { ok: false, code: 'conflict', message: `webhook ${webhookId} is deactivated` };
    if (d.status !== 'dead') return { ok: false, code: 'conflict', message: `delivery ${deliveryId} is ${d.status}; only a dead delivery can be retried` };
    const next: DeliveryRecord = { ...d, status: 'queued', next_attempt_at: new Date(this.options.now()).toISOString() };
    this.writer.changedRecord(next);
    await this.writer.flush();
    // The org changed hands meanwhile: the write may have been dropped; its new owner answers again.
    if (this.owned !== null && this.owned.current(org) !== epoch) return NOT_OWNER;
    return { ok: true, value: next };
  }

  /** Sends a signed ping now: not stored, not retried. */
  ping(webhook: WebhookRecord): Promise<PingResult> {
    return pingWebhook(this.options, webhook);
  }

  /** Stops sending; waits for attempts in flight and pending writes. */
  async close(): Promise<void> {
    this.running = false;
    this.owned?.close();
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    await Promise.all(this.attempts);
    await this.saveCursors();
    this.writer.stop();
  }

  /** Starts every due attempt the bounds allow, then sets the timer for the next one. */
  private pump(): void {
    if (!this.running) return;
    const now = this.options.now();
    for (;;) {
      const d = this.queued.take(now);
      if (d === undefined) break;
      const epoch = this.owned?.current(d.org);
      if (epoch === null) {
        this.queued.release(d); // no longer this node's to send
        continue;
      }
      const token = {};
      this.sending.set(d.id, token);
      let slot = true;
      const free = (outcome?: AttemptOutcome): void => {
        if (!slot) return;
        slot = false;
        this.queued.release(d, outcome);
        this.pump();
      };
      const attempt = this.attempt(d, token, free, epoch).finally(() => {
        this.notSending(d.id, token);
        this.attempts.delete(attempt);
        free();
      });
      this.attempts.add(attempt);
    }
    this.arm();
  }

  private arm(): void {
    const next = this.queued.nextAt();
    if (next === undefined || next >= this.timerAt) return;
    if (this.timer !== null) clearTimeout(this.timer);
    this.timerAt = next;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.timerAt = Infinity;
      this.pump();
    }, Math.min(Math.max(0, next - this.options.now()), 2 ** 31 - 1));
    this.timer.unref();
  }

  /**
   * `sent`: called once the request is over (answer, error or timeout), so its slot serves
   * another attempt while the outcome is written; told the outcome, which paces the webhook's
   * next attempts (DeliveryScheduler.release). `epoch`: cluster mode, the org's epoch when the
   * attempt began (DeliveryOwnership.current).
   */
  private async attempt(d: DeliveryRecord, token: object, sent: (outcome?: AttemptOutcome) => void, epoch?: number): Promise<void> {
    const webhook = this.webhooks.get(d.org, d.webhook_id);
    let next: DeliveryRecord;
    let gone = false;
    let now = this.options.now();
    if (webhook === undefined || !webhook.active) {
      next = { ...d, status: 'cancelled', last_error: d.last_error ?? 'webhook deactivated' };
    } else {
      const result = await sendSigned(this.options, webhook, d.envelope_id, d.event, d.body);
      // A webhook deactivated, or an org gone to another node, meanwhile is forgotten by the scheduler.
      const known = this.webhooks.get(d.org, d.webhook_id)?.active === true && (this.owned === null || this.owned.current(d.org) === epoch);
      sent(known ? (isDelivered(result) ? 'delivered' : 'failed') : undefined);
      now = this.options.now();
      gone = isGone(result);
      next = afterAttempt(d, result, now, this.options.schedule, this.options.random ?? Math.random);
    }
    // Deactivated while this attempt was out: no retry.
    if (next.status === 'queued' && this.webhooks.get(next.org, next.webhook_id)?.active !== true) {
      next = { ...next, status: 'cancelled' };
    }
    this.options.attempted?.(next.status === 'queued' ? 'retry' : next.status);
    if (this.owned !== null && this.owned.current(d.org) !== epoch) {
      // The org changed hands while this attempt was out: its new owner makes it again (same id).
      this.options.log.info({ org: d.org, delivery: d.id, status: next.status }, 'delivery attempt not recorded: the org moved to another node');
      return;
    }
    this.writer.changedRecord(next);
    await this.writer.flush();
    // Its outcome is stored (or held, which retry() sees): no longer out, whatever the health check awaits.
    this.notSending(d.id, token);
    if (webhook !== undefined && next.attempts > d.attempts) await this.health.attempted(webhook, next.status === 'delivered', gone, now);
  }

  /** The attempt of `token` is over (a later attempt of the same delivery keeps its own mark). */
  private notSending(id: number, token: object): void {
    if (this.sending.get(id) === token) this.sending.delete(id);
  }

  /** `count` fresh delivery ids of the org, the first returned (cluster mode: from the cluster's blocks). */
  private async newIds(org: string, count: number): Promise<number> {
    const scope = this.options.scope;
    if (scope === undefined) {
      this.nextId += count;
      return this.nextId - count;
    }
    if (count > scope.ids.maxTake) throw new RangeError(`delivery ids: ${count} at once is more than ${scope.ids.maxTake}`);
    return scope.ids.take(org, count);
  }
}
