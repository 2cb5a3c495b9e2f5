import { JetStreamApiCodes, JetStreamApiError, type JetStreamClient, type JetStreamManager } from '@nats-io/jetstream';
import type { Logger } from '../log.js';
import { unpackBatch } from './batch-codec.js';
import { ledgerSubject, type LedgerStreamNames } from './ledger-stream.js';
import { readFiltered } from './partition-catch-up.js';
import { whileSettling } from './stream-settling.js';

/** A node of an earlier version wrote the stream after it was moved onto partitioned subjects. */
export class EarlierLayoutError extends Error {}

/** The subject whose one message says the stream's batches are all on partitioned subjects. */
export function layoutMarker(names: LedgerStreamNames): string {
  return `${names.subjectPrefix}.layout.2`;
}

/**
 * Moves a ledger stream written before subjects carried the partition (`<prefix>.<org>`) to
 * `<prefix>.<partition>.<org>`: each org's batches are copied, byte for byte and in order, onto
 * its new subject, each fenced on the one before there, and a marker message says it is done, so
 * later starts ask one question (a stream of this version has no old subject and needs no
 * marker). The old messages stay (the stream denies deletes); nothing reads them again. Nodes
 * starting together may all run it: a copy refused by the fence means another node copied that
 * batch, and the copy goes on after what the new subject holds. Nodes of the earlier version must
 * all be stopped first (they would go on writing the old subjects; a start after the move that
 * finds such a write refuses, EarlierLayoutError). Resolves with the number of orgs copied here.
 */
export async function migrateEarlierLayout(js: JetStreamClient, jsm: JetStreamManager, names: LedgerStreamNames, log: Logger): Promise<number> {
  // The first questions a new stream is asked: a new R3 stream may not answer while it elects a leader.
  const marker = await whileSettling(() => jsm.streams.getMessage(names.stream, { last_by_subj: layoutMarker(names) }));
  if (marker !== null) {
    // A node of the earlier version that kept running wrote where nothing reads: refused, never lost quietly.
    const late = await whileSettling(() => jsm.streams.getMessage(names.stream, { last_by_subj: `${names.subjectPrefix}.*` }));
    if (late !== null && late.seq > marker.seq) {
      throw new EarlierLayoutError(
        `stream ${names.stream}: a node of an earlier version wrote ${late.subject} (stream sequence ${late.seq}) after its batches were moved onto partitioned subjects; ` +
          'those batches are not read by this version: stop every node of the earlier version (see the README, cluster mode, on upgrading)',
      );
    }
    return 0;
  }
  const info = await whileSettling(() => jsm.streams.info(names.stream, { subjects_filter: `${names.subjectPrefix}.*` }));
  const subjects = Object.keys(info.state.subjects ?? {});
  let moved = 0;
  if (subjects.length > 0) log.warn({ stream: names.stream, orgs: subjects.length }, 'ledger stream: moving the batches of an earlier version onto subjects that carry the partition');
  for (const subject of subjects) {
    const org = subject.slice(names.subjectPrefix.length + 1);
    if (await copyOrg(js, jsm, names, subject, ledgerSubject(names, org))) moved++;
  }
  if (subjects.length === 0) return 0; // a stream of this version: nothing to move, no marker
  await js.publish(layoutMarker(names), new Uint8Array(0));
  log.info({ stream: names.stream, orgs: subjects.length, copied: moved }, 'ledger stream: every org\'s batches are on partitioned subjects');
  return moved;
}

/** Copies the old subject's batches the new one lacks; whether it copied any. */
async function copyOrg(js: JetStreamClient, jsm: JetStreamManager, names: LedgerStreamNames, from: string, to: string): Promise<boolean> {
  const end = await jsm.streams.getMessage(names.stream, { last_by_subj: from });
  if (end === null) return false;
  let { fence, held } = await tailOf(jsm, names, to);
  if (held >= lastSeq(end.data)) return false;
  let copied = false;
  const reached = await readFiltered(js, names.stream, from, { after: 0, end: end.seq }, async (message) => {
    const batch = unpackBatch(message.data);
    const last = batch.first + batch.rows.length - 1;
    if (last <= held) return;
    if (batch.first !== held + 1) throw new Error(`ledger stream: ${from} holds rows ${batch.first}..${last} after rows through ${held} on ${to}: cannot move it`);
    try {
      fence = (await js.publish(to, message.data, { expect: { lastSubjectSequence: fence } })).seq;
      held = last;
      copied = true;
    } catch (error) {
      if (!(error instanceof JetStreamApiError && error.code === JetStreamApiCodes.StreamWrongLastSequence)) throw error;
      // Another node copied it: go on after what the new subject holds.
      ({ fence, held } = await tailOf(jsm, names, to));
      if (last > held) throw new Error(`ledger stream: ${to} moved while this node copied ${from}; start again`, { cause: error });
    }
  });
  if (reached < end.seq) throw new Error(`ledger stream: the consumer of ${from} stopped at stream sequence ${reached}, short of ${end.seq}`);
  return copied;
}

/** A subject's last message: its stream sequence (the fence) and its last row's seq (0, 0: none). */
async function tailOf(jsm: JetStreamManager, names: LedgerStreamNames, subject: string): Promise<{ fence: number; held: number }> {
  const last = await jsm.streams.getMessage(names.stream, { last_by_subj: subject });
  return last === null ? { fence: 0, held: 0 } : { fence: last.seq, held: lastSeq(last.data) };
}

function lastSeq(data: Uint8Array): number {
  const batch = unpackBatch(data);
  return batch.first + batch.rows.length - 1;
}
