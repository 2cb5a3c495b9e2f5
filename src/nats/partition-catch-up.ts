import type { JetStreamClient, JetStreamManager, JsMsg } from '@nats-io/jetstream';
import { partitionSubjects, type LedgerStreamNames } from './ledger-stream.js';

/** Messages one fetch asks for, and how long it waits for them. */
const FETCH = 1000;
const FETCH_MS = 2000;

export interface CatchUpArgs {
  js: JetStreamClient;
  jsm: JetStreamManager;
  names: LedgerStreamNames;
  partition: number;
  /** The stream sequence read from: every batch of the partition up to it is held already. */
  after: number;
  /** Takes one message of the partition, in stream order. */
  deliver: (message: JsMsg) => void;
  /** Whether to stop early (the partition was lost, the node is closing). */
  stopped: () => boolean;
  /** How far the read has come, for the replication-lag gauge. */
  progress?: (reached: number, end: number) => void;
}

/**
 * Reads one partition's batches that the stream holds after `after`, up to the partition's last
 * batch as of the call, through one consumer filtered on the partition's subjects, fetched a
 * thousand at a time: what a node that gains a partition lacks of it. Resolves with the stream
 * sequence every batch of the partition is held up to (`after` if it holds none); throws if the
 * consumer stops short of that end (a consumer placed on a server still catching up after a
 * partition), and the caller tries again.
 */
export async function catchUpPartition(args: CatchUpArgs): Promise<number> {
  const subjects = partitionSubjects(args.names, args.partition);
  const last = await args.jsm.streams.getMessage(args.names.stream, { last_by_subj: subjects });
  if (last === null || last.seq <= args.after) return Math.max(args.after, last?.seq ?? 0);
  const consumer = await args.js.consumers.get(args.names.stream, { filter_subjects: subjects, opt_start_seq: args.after + 1 });
  let reached = args.after;
  try {
    while (reached < last.seq && !args.stopped()) {
      let got = 0;
      for await (const message of await consumer.fetch({ max_messages: FETCH, expires: FETCH_MS })) {
        got++;
        reached = message.seq;
        args.deliver(message);
        if (reached >= last.seq || args.stopped()) break;
      }
      args.progress?.(reached, last.seq);
      if (got === 0) break;
    }
  } finally {
    await consumer.delete().catch(() => undefined);
  }
  if (reached < last.seq && !args.stopped()) throw new Error(`partition ${args.partition}: the consumer stopped at stream sequence ${reached}, short of ${last.seq}`);
  return reached;
}
