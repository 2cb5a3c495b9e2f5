import { z } from 'zod';
import { agentId } from '../../domain/schemas.js';
import { damagedRead } from '../../actors/org-recovery.js';
import { exportLine, type LedgerRow } from '../../domain/ledger.js';
import { parseRecord } from '../../domain/records.js';
import { VigilError } from '../../errors.js';
import type { AppDeps } from '../deps.js';
import type { Route } from '../router.js';
import { validate } from '../validate.js';

const seqParam = z.string().regex(/^\d{1,15}$/, 'a non-negative integer').transform(Number);
export const exportQuery = z.object({
  since_seq: seqParam.optional(),
  until_seq: seqParam.optional(),
  agent_id: agentId.optional(),
});
export const verifyQuery = z.object({ head: z.string().regex(/^[0-9a-f]{64}$/, 'a 64-character lowercase hex hash').optional() });

/** Ledger export (JSON Lines, streamed) and chain verification. */
export function auditRoutes(deps: AppDeps): Route[] {
  return [
    {
      method: 'get',
      path: '/audit/export',
      audit: true,
      auth: 'key',
      // Streamed: answered by the node it reaches, from its ledger's rows (caught up first), the
      // only thing of the org it reads.
      forward: false,
      handler: ({ key, query }) => {
        const q = validate(exportQuery, Object.fromEntries(query), 'query');
        const last = deps.ledger.last(key.org)?.seq ?? 0;
        const since = q.since_seq ?? 0;
        const until = Math.min(q.until_seq ?? last, last);
        if (q.until_seq !== undefined && q.until_seq < since) {
          throw new VigilError('validation_failed', 'until_seq must not be below since_seq', [
            { path: 'until_seq', message: 'must be >= since_seq' },
          ]);
        }
        const lines = exportLines(key.org, deps.ledger.range(key.org, since + 1, until), q.agent_id);
        // Up to the first line is read now, while a damaged row met before it can still be an
        // error status; one met later can only end the 200's body.
        const first = lines.next();
        return { lines: resume(first, lines), contentType: 'application/x-ndjson', headers: { 'x-vigil-ledger-head-seq': String(last) } };
      },
    },
    {
      method: 'get',
      path: '/audit/:agent_id/verify',
      audit: true,
      auth: 'key',
      // The whole chain rehashed may take longer than a forwarded request waits: answered here,
      // from the ledger's rows alone (caught up first; this node's directory of an org it does
      // not own may trail them, or not be kept): an agent is known by its rows, the first being
      // its registration, so one with none is not found.
      forward: false,
      handler: async ({ key, params, query }) => {
        const q = validate(verifyQuery, Object.fromEntries(query), 'query');
        const id = params.agent_id ?? '';
        const length = deps.ledger.last(key.org)?.seq ?? 0;
        const check = await deps.verifyChain(key.org, length, id, q.head === undefined ? null : Buffer.from(q.head, 'hex'));
        if (check.agent_records === 0) throw new VigilError('not_found', `agent ${id} not found`);
        const body: Record<string, unknown> = {
          ok: check.ok,
          org: key.org,
          agent_id: id,
          head: check.head,
          length: check.length,
          agent_records: check.agent_records,
          first_bad_seq: check.first_bad_seq,
          problem: check.problem,
        };
        if (q.head !== undefined) {
          const at = check.watched_seq;
          const trusted = at !== null && (check.first_bad_seq === null || check.first_bad_seq > at);
          body.head_check = { head: q.head, is_prefix: trusted, seq: trusted ? at : null };
        }
        return { body };
      },
    },
  ];
}

/**
 * The export's lines: the window's rows (of one agent when asked) up to the first damaged row,
 * whoever's it is (its agent cannot be trusted). Met before any line, a damaged row throws
 * `ledger_damaged` (503); met after, it ends the lines with one trailer that is not a ledger
 * record, `{"error":{code, message, details}}`, and nothing follows it.
 */
function* exportLines(org: string, rows: Iterable<LedgerRow>, agentId: string | undefined): Generator<string> {
  let sent = false;
  for (const row of rows) {
    if (parseRecord(row) === null) {
      const damaged = damagedRead(org, row.seq);
      if (!sent) throw damaged;
      yield JSON.stringify({ error: { code: damaged.code, message: damaged.message, details: damaged.details } });
      return;
    }
    if (agentId !== undefined && row.agentId !== agentId) continue;
    sent = true;
    yield exportLine(row);
  }
}

/** The lines of `rest` after its `first`, already read. */
function* resume(first: IteratorResult<string>, rest: Iterator<string>): Generator<string> {
  for (let next = first; next.done !== true; next = rest.next()) yield next.value;
}
