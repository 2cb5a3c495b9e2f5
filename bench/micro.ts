/**
 * Micro benchmarks (tinybench). Every target is built with its fixtures outside the timed
 * function, and exposes `check()` so a test can prove it computes the right thing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pack, unpack } from 'msgpackr';
import { Bench } from 'tinybench';
import { canonicalize } from '../src/domain/jcs.js';
import { chainRows, type RowDraft } from '../src/domain/ledger-batch.js';
import { canonicalEntry, chainStep, GENESIS_HASH, makeRow, sha256, type LedgerRow } from '../src/domain/ledger.js';
import { nativeSha256Rows } from '../src/store/batch-hash.js';
import { POLICY_V1 } from '../src/domain/policy.js';
import { FRESH_STATE, score, type ScoredEvent, type ScoringState } from '../src/domain/scoring.js';
import { openLmdb } from '../src/store/lmdb.js';

export interface MicroTarget {
  name: string;
  run: () => unknown;
  /** Runs the target once on its fixture and says whether the result is right. */
  check: () => boolean | Promise<boolean>;
  iterations?: number;
  teardown?: () => Promise<void>;
}

/** A typical event body, as the org writer records it. */
export const EVENT_BODY = {
  event_id: 42,
  action_id: 42,
  event_type: 'config_write',
  source: 'platform_hook',
  actor: 'ops@example.com',
  dti: 0.2,
  payload: { key: 'feature.flags', value: { beta: true, rollout: 0.25 }, content_length: 512 },
  gate_status: 'pass',
  bii: 0.8812,
  composite_trust: 0.8812,
  reason: 'config write',
  requires_human_review: false,
  policy_digest: 'f'.repeat(64),
  observed: true,
};
const RECORDED_AT = '2026-11-22T00:00:02.222Z';

export function chainTarget(): MicroTarget {
  const prev = sha256('previous');
  // The expected hashes, computed step by step from the rule.
  const content = sha256(canonicalEntry(7, 'event', RECORDED_AT, 'agent-1', canonicalize(EVENT_BODY)));
  const expected = chainStep(prev, content);
  return {
    name: 'JCS + SHA-256 chain step (one event record)',
    run: () => makeRow(prev, 7, 'event', RECORDED_AT, 'agent-1', EVENT_BODY),
    check: () => {
      const row = makeRow(prev, 7, 'event', RECORDED_AT, 'agent-1', EVENT_BODY);
      return row.contentHash.equals(content) && row.chainHash.equals(expected);
    },
  };
}

/** The writer's path: a batch of 64 rows hashed at once (native addon, or node:crypto without it). */
export function chainBatchTarget(size = 64): MicroTarget {
  const prev = sha256('previous');
  const bodyJson = canonicalize(EVENT_BODY);
  const drafts: RowDraft[] = Array.from({ length: size }, () => ({ kind: 'event', recordedAt: RECORDED_AT, agentId: 'agent-1', bodyJson, body: EVENT_BODY }));
  return {
    name: `JCS entries + SHA-256 chain, batch of ${size} (${nativeSha256Rows === null ? 'node:crypto' : 'native'}), per batch`,
    run: () => chainRows(prev, 7, drafts, nativeSha256Rows),
    check: () => {
      const rows = chainRows(prev, 7, drafts, nativeSha256Rows);
      let head = prev;
      return rows.every((row, i) => {
        const expected = makeRow(head, 7 + i, 'event', RECORDED_AT, 'agent-1', EVENT_BODY);
        head = expected.chainHash;
        return row.contentHash.equals(expected.contentHash) && row.chainHash.equals(expected.chainHash);
      });
    },
  };
}

export function scoringTarget(): MicroTarget {
  let state: ScoringState = { ...FRESH_STATE };
  for (let i = 0; i < 10; i++) state = score(POLICY_V1, state, { event_type: 'output_generated', payload: {}, dti: 0.1, observed: true }).state;
  const event: ScoredEvent = { event_type: 'config_write', payload: { key: 'monitoring.enabled', value: false }, dti: 0.3, observed: false };
  return {
    name: 'scoring (one event)',
    run: () => score(POLICY_V1, state, event),
    check: () => {
      const { decision } = score(POLICY_V1, state, event);
      // Oversight config written: severe, so BII is capped below the pass line at once.
      return decision.gate_status !== 'pass' && decision.bii <= POLICY_V1.severe.bii_cap && decision.requires_human_review && decision.reason.startsWith('writes oversight config');
    },
  };
}

export function lmdbTarget(batches: number, batchSize = 64): MicroTarget {
  const dir = mkdtempSync(join(tmpdir(), 'vigil-bench-lmdb-'));
  const lmdb = openLmdb(dir, 'sync');
  const store = lmdb.ledger;
  const all: LedgerRow[][] = [];
  let prev = GENESIS_HASH;
  let seq = 0;
  for (let b = 0; b < batches + 1; b++) {
    const batch: LedgerRow[] = [];
    for (let i = 0; i < batchSize; i++) {
      const row = makeRow(prev, ++seq, 'event', RECORDED_AT, 'agent-1', EVENT_BODY);
      batch.push(row);
      prev = row.chainHash;
    }
    all.push(batch);
  }
  let next = 0;
  return {
    name: `LMDB append, batch of ${batchSize} (durable: commit + fsync)`,
    iterations: batches,
    run: async () => {
      const batch = all[next]!;
      const committed = await store.commit('bench', batch, batch[0]!.seq - 1);
      next++;
      return { ok: committed };
    },
    check: async () => {
      const probeDir = mkdtempSync(join(tmpdir(), 'vigil-bench-check-'));
      try {
        const probe = openLmdb(probeDir, 'sync');
        const committed = await probe.ledger.commit('bench', all[0]!, 0);
        const back = [...probe.ledger.range('bench', 1)];
        await probe.close();
        return committed && back.length === batchSize && back.every((r, i) => r.chainHash.equals(all[0]![i]!.chainHash));
      } finally {
        rmSync(probeDir, { recursive: true, force: true });
      }
    },
    teardown: async () => {
      await lmdb.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

const ROW_VALUE = ['event', RECORDED_AT, 'agent-1', canonicalize(EVENT_BODY), sha256('a'), sha256('b'), sha256('c')];

export function msgpackTarget(): MicroTarget {
  return {
    name: 'msgpack encode + decode (ledger row)',
    run: () => unpack(pack(ROW_VALUE)) as unknown,
    check: () => {
      const back = unpack(pack(ROW_VALUE)) as unknown[];
      return back.length === 7 && back[3] === ROW_VALUE[3] && Buffer.from(back[4] as Uint8Array).equals(ROW_VALUE[4] as Buffer);
    },
  };
}

const JSON_VALUE = { kind: 'event', recorded_at: RECORDED_AT, agent_id: 'agent-1', body: EVENT_BODY, content_hash: 'a'.repeat(64), prev_hash: 'b'.repeat(64), chain_hash: 'c'.repeat(64) };

export function jsonTarget(): MicroTarget {
  return {
    name: 'JSON stringify + parse (same row, hex hashes)',
    run: () => JSON.parse(JSON.stringify(JSON_VALUE)) as unknown,
    check: () => JSON.stringify(JSON.parse(JSON.stringify(JSON_VALUE))) === JSON.stringify(JSON_VALUE),
  };
}

export function microTargets(quick: boolean): MicroTarget[] {
  return [chainTarget(), chainBatchTarget(), scoringTarget(), lmdbTarget(quick ? 200 : 1000), msgpackTarget(), jsonTarget()];
}

export interface MicroResult {
  name: string;
  opsPerSec: number;
  meanUs: number;
}

export async function runMicro(quick: boolean): Promise<MicroResult[]> {
  const results: MicroResult[] = [];
  for (const target of microTargets(quick)) {
    if (!(await target.check())) throw new Error(`micro target computes a wrong result: ${target.name}`);
    const bench = new Bench(target.iterations === undefined ? { time: quick ? 300 : 1000 } : { time: 0, iterations: target.iterations, warmup: false });
    bench.add(target.name, target.run);
    await bench.run();
    const task = bench.tasks[0]!;
    const r = task.result as { throughput?: { mean: number }; latency?: { mean: number } } | undefined;
    const meanMs = r?.latency?.mean ?? NaN;
    results.push({ name: target.name, opsPerSec: Math.round(r?.throughput?.mean ?? 1000 / meanMs), meanUs: Math.round(meanMs * 1000 * 100) / 100 });
    await target.teardown?.();
  }
  return results;
}
