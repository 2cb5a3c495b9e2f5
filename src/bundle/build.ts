import type { AgentDirectory, AgentSummary } from '../actors/agent-directory.js';
import { damagedRead } from '../actors/org-recovery.js';
import { buildBundle, type BuiltBundle } from '../domain/bundle.js';
import { CHECKPOINT_FILE, MERKLE_FILE, merkleFileText, type MerkleFile } from '../domain/bundle-log.js';
import { exportLine, type LedgerRow } from '../domain/ledger.js';
import { parseRecord } from '../domain/records.js';
import type { LedgerReader } from '../store/ledger-reader.js';

export interface BundleRequest {
  org: string;
  /** Exclusive. */
  since_seq: number;
  /** Inclusive, at most the committed length. */
  until_seq: number;
  /** Limits cards, incidents and oversight (never the ledger window); null: every agent. */
  agents: string[] | null;
  /** The log files (DESIGN §10): the signed checkpoint at until_seq and the range before since_seq. */
  log: { checkpoint: string; merkle: MerkleFile };
}

const ZERO_HASH = '0'.repeat(64);
const lines = (items: unknown[]): Buffer => Buffer.from(items.map((item) => JSON.stringify(item) + '\n').join(''));

/**
 * Builds an export bundle of a committed ledger window: the window as exported (ledger.jsonl),
 * agent cards (registry facts and current state), held gate decisions (incidents.jsonl) and review
 * decisions (oversight.jsonl) in the window, the log files (checkpoint.txt, merkle.json), and the
 * manifest over them.
 */
export function buildOrgBundle(ledger: Pick<LedgerReader, 'get' | 'range'>, directory: AgentDirectory, req: BundleRequest, createdAt: string): BuiltBundle {
  const scope = req.agents === null ? null : new Set(req.agents);
  const inScope = (row: LedgerRow): boolean => scope === null || (row.agentId !== null && scope.has(row.agentId));
  const ledgerLines: string[] = [];
  const incidents: unknown[] = [];
  const oversight: unknown[] = [];
  const digests = new Set<string>();
  let last: LedgerRow | undefined;
  for (const row of ledger.range(req.org, req.since_seq + 1, req.until_seq)) {
    ledgerLines.push(exportLine(row) + '\n');
    last = row;
    const record = parseRecord(row);
    // A bundle is whole or nothing: a damaged row in its window refuses it (503 ledger_damaged).
    if (record === null) throw damagedRead(req.org, row.seq);
    if (record.kind === 'event') {
      const body = record.body;
      if (body.policy_digest !== undefined) digests.add(body.policy_digest);
      if (body.gate_status !== 'pass' && inScope(row)) {
        incidents.push({
          seq: row.seq,
          recorded_at: row.recordedAt,
          agent_id: row.agentId,
          action_id: body.action_id,
          event_id: body.event_id,
          event_type: body.event_type,
          gate_status: body.gate_status,
          bii: body.bii,
          composite_trust: body.composite_trust,
          reason: body.reason,
          policy_digest: body.policy_digest,
          chain_hash: row.chainHash.toString('hex'),
        });
      }
    } else if (record.kind === 'review' && inScope(row)) {
      const body = record.body;
      oversight.push({
        seq: row.seq,
        recorded_at: row.recordedAt,
        agent_id: row.agentId,
        action_id: body.action_id,
        outcome: body.outcome,
        note: body.note,
        reviewer: body.reviewer,
        held_gate: body.held_gate,
        gate_status: body.gate_status,
        bii: body.bii,
        chain_hash: row.chainHash.toString('hex'),
      });
    }
  }
  if (last === undefined || last.seq !== req.until_seq) throw new Error(`ledger window ${req.since_seq}..${req.until_seq} of ${req.org} is not complete`);
  const start = req.since_seq === 0 ? ZERO_HASH : ledger.get(req.org, req.since_seq)?.chainHash.toString('hex');
  if (start === undefined) throw new Error(`ledger row ${req.since_seq} of ${req.org} is missing`);
  const agents = [...(directory.org(req.org)?.agents.values() ?? [])]
    .filter((a) => scope === null || scope.has(a.agent_id))
    .sort((a, b) => (a.agent_id < b.agent_id ? -1 : a.agent_id > b.agent_id ? 1 : 0))
    .map(card);
  return buildBundle({
    org: req.org,
    since_seq: req.since_seq,
    until_seq: req.until_seq,
    start_hash: start,
    end_hash: last.chainHash.toString('hex'),
    policy_digests: [...digests],
    agents: req.agents,
    created_at: createdAt,
    data: [
      { name: 'ledger.jsonl', content: Buffer.from(ledgerLines.join('')) },
      { name: 'cards.json', content: Buffer.from(JSON.stringify(agents, null, 2) + '\n') },
      { name: 'incidents.jsonl', content: lines(incidents) },
      { name: 'oversight.jsonl', content: lines(oversight) },
      { name: CHECKPOINT_FILE, content: Buffer.from(req.log.checkpoint, 'utf8') },
      { name: MERKLE_FILE, content: Buffer.from(merkleFileText(req.log.merkle), 'utf8') },
    ],
  });
}

/** An agent card: registry facts and current state, as of the export. */
function card(a: AgentSummary) {
  return {
    agent_id: a.agent_id,
    name: a.name,
    kind: a.kind,
    observed: a.observed,
    is_active: a.is_active,
    public: a.public,
    public_links: a.public_links,
    created_at: a.created_at,
    updated_at: a.updated_at,
    gate: a.gate,
    bii: a.bii,
    policy_digest: a.policy_digest,
    ledger_records: a.ledger_records,
    last_event_at: a.last_event_at,
  };
}
