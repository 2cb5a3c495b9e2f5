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
  const reached = await readFiltered(args.js, args.names.stream, subjects, { after: args.after, end: last.seq }, args.deliver, args.stopped, args.progress);
  if (reached < last.seq && !args.stopped()) throw new Error(`partition ${args.partition}: the consumer stopped at stream sequence ${reached}, short of ${last.seq}`);
  return reached;
}

/**
 * Hands `deliver` the stream's messages on `filter` after stream sequence `after`, in order, up to
 * `end`, through one consumer fetching a thousand at a time (deleted after). Resolves with the
 * last sequence handed over: short of `end` when a fetch brought nothing or `stopped` said so.
 */
export async function readFiltered(
  js: JetStreamClient,
  stream: string,
  filter: string,
  span: { after: number; end: number },
  deliver: (message: JsMsg) => void | Promise<void>,
  stopped: () => boolean = () => false,
  progress?: (reached: number, end: number) => void,
): Promise<number> {
  const consumer = await js.consumers.get(stream, { filter_subjects: filter, opt_start_seq: span.after + 1 });
  let reached = span.after;
  try {
    while (reached < span.end && !stopped()) {
      let got = 0;
      for await (const message of await consumer.fetch({ max_messages: FETCH, expires: FETCH_MS })) {
        got++;
        reached = message.seq;
        await deliver(message);
        if (reached >= span.end || stopped()) break;
      }
      progress?.(reached, span.end);
      if (got === 0) break;
    }
  } finally {
    await consumer.delete().catch(() => undefined);
  }
  return reached;
}
