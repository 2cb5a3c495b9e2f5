import type { PublicRecord } from '../../domain/public-record.js';
import { esc, layout } from './html.js';

/** How to verify an agent's record: the hash rule, the commands, and the prefix check. */
export function verifyPage(record: PublicRecord, baseUrl: string): string {
  const org = encodeURIComponent(record.org);
  const agent = encodeURIComponent(record.agent_id);
  const head = record.ledger_head ?? '<head>';
  const body = `
<p><a href="${esc(record.verify_url.replace(/\/verify$/, ''))}">← ${esc(record.name)}</a></p>
<h1>Verifying the record of ${esc(record.name)}</h1>
<h2>1. Note today's head</h2>
<p>Anyone can read the public record and write down its <code>ledger_head</code>:</p>
<pre>curl -s ${esc(baseUrl)}/public/agents/${esc(org)}/${esc(agent)}</pre>
<p>Today it is <code>${esc(head)}</code> after ${esc(record.ledger_records)} records of this agent.</p>
<h2>2. The hash rule</h2>
<p>Each ledger record is <code>{seq, kind, recorded_at, agent_id, body, content_hash, prev_hash, chain_hash}</code>, with</p>
<pre>content_hash = hex(SHA-256(JCS({seq, kind, recorded_at, agent_id, body})))   JCS = RFC 8785
chain_hash   = hex(SHA-256(prev_hash bytes ‖ content_hash bytes))            raw 32-byte values
prev_hash of seq 1 = 64 zeros; the organization's head = the last chain_hash</pre>
<h2>3. Recompute the chain (the owner, with a key, or anyone the owner gives an export)</h2>
<pre>curl -s -H "Authorization: Bearer $VIGIL_KEY" "${esc(baseUrl)}/audit/export" &gt; ledger.jsonl
npm run vigil -- verify ledger.jsonl
curl -s -H "Authorization: Bearer $VIGIL_KEY" "${esc(baseUrl)}/audit/${esc(agent)}/verify"</pre>
<p>The offline verifier recomputes every hash and names the first record that does not match.
Any independent RFC 8785 + SHA-256 implementation gives the same result.</p>
<h2>4. The prefix check</h2>
<p>A head seen earlier is genuine only if it is the chain hash at some seq of today's chain. Keep the
head you noted and check it later:</p>
<pre>curl -s -H "Authorization: Bearer $VIGIL_KEY" "${esc(baseUrl)}/audit/${esc(agent)}/verify?head=${esc(head)}"</pre>
<p><code>head_check.is_prefix</code> must be <code>true</code>, with the seq at which that head stands.
In an export, the same head must appear as the <code>chain_hash</code> of one record. If it does not, the
ledger was rewritten after you saw it.</p>`;
  return layout(`Verify ${record.name}`, body);
}
