import type { AgentDirectory } from '../actors/agent-directory.js';
import type { DeliveryActor } from '../actors/delivery-actor.js';
import type { ExportLog } from '../actors/export-log.js';
import type { LogCheckpoints } from '../actors/log-checkpoints.js';
import type { MerkleTrees } from '../actors/merkle-trees.js';
import type { PublicRecords } from '../actors/public-records.js';
import type { ReviewQueue } from '../actors/review-queue.js';
import type { UsageMeter } from '../actors/usage-meter.js';
import type { WebhookRegistry } from '../services/webhook-registry.js';
import type { CommandRouter } from '../bus/command-router.js';
import type { Refusal } from '../bus/messages.js';
import type { Config } from '../config.js';
import type { Studio } from '../services/studio.js';
import { VigilError } from '../errors.js';
import type { Registry } from '../services/registry.js';
import type { LedgerReader } from '../store/ledger-reader.js';
import type { ScoringKeyStore } from '../record-scoring/key-store.js';
import type { ChainCheck } from '../store/verify-chain.js';
import type { WebhookStore } from '../store/webhook-store.js';
import type { Logger } from '../log.js';
import type { Metrics } from '../metrics.js';
import type { IntakePacer } from './intake-pacer.js';
import type { KeyedReads } from './keyed-reads.js';
import type { PartitionMap } from '../nats/partition-map.js';

/** What route handlers may use. Chosen by the composition root (runtime.ts). */
export interface AppDeps {
  config: Config;
  log: Logger;
  mode: 'embedded' | 'cluster';
  /** Cluster mode: this node's name and the partitions it owns now (GET /health), and who owns each (GET /cluster/map). */
  cluster?: { node: string; partitionsOwned: () => number[]; map: () => PartitionMap } | undefined;
  /** Cluster mode: read-your-writes on this node (a bundle's window; keyed GETs go through `reads`). */
  caughtUp?: ((org: string) => Promise<void>) | undefined;
  /** Cluster mode: after `caughtUp`, until this node's projections of the org have taken the rows it brought (bounded, else 503). */
  settled?: ((org: string) => Promise<void>) | undefined;
  /** Cluster mode: keyed GETs answered by the org's owner. */
  reads?: KeyedReads | undefined;
  /** Commands to the org writers. */
  commands: CommandRouter;
  /** Large ingests go to the writers a slice per turn, round robin between orgs. */
  intake: IntakePacer;
  registry: Registry;
  ledger: LedgerReader;
  directory: AgentDirectory;
  publicRecords: PublicRecords;
  reviews: ReviewQueue;
  webhooks: WebhookRegistry;
  webhookStore: WebhookStore;
  deliveries: DeliveryActor;
  meter: UsageMeter;
  exportLog: ExportLog;
  /** The transparency log (DESIGN §10): every org's Merkle tree and latest signed checkpoint. */
  transparency: { trees: MerkleTrees; checkpoints: LogCheckpoints };
  /** Demo mode's studio and chat; null when demo mode is off (the routes are then not mounted). */
  studio: Studio | null;
  /** Sandbox keys of the record-scoring interface (/api/v1). */
  scoringKeys: ScoringKeyStore;
  now: () => number;
  /** GET /metrics and its token (VIGIL_METRICS_TOKEN); null when unset: nothing counted, no route. */
  metrics: { metrics: Metrics; token: string } | null;
  /** Recomputes an org's chain up to `length` (in parallel on a large ledger). */
  verifyChain: (org: string, length: number, agentId: string | null, watchHead: Buffer | null) => Promise<ChainCheck>;
}

/** Turns an org writer's refusal value into the HTTP error it stands for. */
export function unwrap<T>(reply: { ok: true; value: T } | Refusal): T {
  if (reply.ok) return reply.value;
  const retry =
    reply.retryAfterSeconds !== undefined
      ? { retryAfterSeconds: reply.retryAfterSeconds }
      : reply.code === 'overloaded' || reply.code === 'unavailable'
        ? { retryAfterSeconds: 1 }
        : undefined;
  throw new VigilError(reply.code, reply.message, undefined, retry);
}
