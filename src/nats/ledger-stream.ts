import { JetStreamApiError, StorageType, type JetStreamManager, type StreamConfig } from '@nats-io/jetstream';
import type { Logger } from '../log.js';
import { DEFAULT_PARTITIONS, partitionOf } from './partition.js';
import { STREAM_NAME_IN_USE, whileSettling } from './stream-settling.js';

/** Where the ledger lives (DESIGN §8); tests pass their own names so cases do not meet. */
export interface LedgerStreamNames {
  /** Default `VIGIL_LEDGER`. */
  stream: string;
  /** Default `vigil.ledger`: org `acme` of partition 17 publishes on `vigil.ledger.17.acme`. */
  subjectPrefix: string;
  /** The cluster's partition count (VIGIL_PARTITIONS), which names the subjects' partition token. */
  partitions: number;
}

export const LEDGER_STREAM: LedgerStreamNames = { stream: 'VIGIL_LEDGER', subjectPrefix: 'vigil.ledger', partitions: DEFAULT_PARTITIONS };

/** An org names one subject token: the org slug rule (domain/schemas.ts) keeps it one. */
const TOKEN = /^[A-Za-z0-9_-]+$/;

/**
 * `<prefix>.<partition>.<org>`: the partition token lets a node read only the partitions it
 * owns, one filtered consumer each (`partitionSubjects`).
 */
export function ledgerSubject(names: LedgerStreamNames, org: string): string {
  if (!TOKEN.test(org)) throw new Error(`org ${JSON.stringify(org)} cannot name a ledger subject`);
  return `${names.subjectPrefix}.${partitionOf(org, names.partitions)}.${org}`;
}

/** Every org's subject of one partition. */
export function partitionSubjects(names: LedgerStreamNames, partition: number): string {
  return `${names.subjectPrefix}.${partition}.>`;
}

/** The org a ledger subject names (its last token). */
export function orgOfSubject(subject: string): string {
  return subject.slice(subject.lastIndexOf('.') + 1);
}

/**
 * Creates the ledger stream, or accepts the one there if it keeps what the log relies on: its
 * subjects, file storage, and no deleting or purging of messages (a committed batch is never
 * taken back, and the fences of later batches point past it). Creating an identical stream is a
 * no-op, so nodes starting together may all call this.
 */
export function ensureLedgerStream(jsm: JetStreamManager, names: LedgerStreamNames, replicas: number, log: Logger): Promise<void> {
  return ensureKeptStream(jsm, names, replicas, log, 'ledger');
}

/**
 * A stream of records kept for good (the ledger, the webhook store): subjects `<prefix>.>`, file
 * storage, `replicas`, deny_delete and deny_purge; an existing one is accepted if it keeps all but
 * the replica count (a different count is logged). `what` names it in messages.
 */
export async function ensureKeptStream(jsm: JetStreamManager, names: { stream: string; subjectPrefix: string }, replicas: number, log: Logger, what: string): Promise<void> {
  const config = {
    name: names.stream,
    subjects: [`${names.subjectPrefix}.>`],
    storage: StorageType.File,
    num_replicas: replicas,
    deny_delete: true,
    deny_purge: true,
  } satisfies Partial<StreamConfig>;
  // A create with no answer (a busy cluster electing the new stream's leader) is sent again: with
  // the same configuration it is a no-op if the first one made the stream after all.
  const refused = await whileSettling(async () => {
    try {
      await jsm.streams.add(config);
      return null;
    } catch (error) {
      if (error instanceof JetStreamApiError && error.code === STREAM_NAME_IN_USE) return error;
      throw error;
    }
  });
  if (refused !== null) {
    const existing = (await whileSettling(() => jsm.streams.info(names.stream))).config; // made a moment ago by another node
    const kept =
      existing.subjects?.length === 1 &&
      existing.subjects[0] === config.subjects[0] &&
      existing.storage === StorageType.File &&
      existing.deny_delete &&
      existing.deny_purge;
    if (!kept) throw new Error(`stream ${names.stream} exists with a configuration the ${what} cannot use (subjects, storage, deny_delete, deny_purge)`, { cause: refused });
    if (existing.num_replicas !== replicas) {
      log.warn({ stream: names.stream, replicas: existing.num_replicas, configured: replicas }, `${what} stream kept with its own replica count`);
    }
  }
}
