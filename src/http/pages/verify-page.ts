import type { PublicRecord } from '../../domain/public-record.js';
import { esc, layout } from './html.js';

/**
 * How to verify an agent's record: first what anyone can check with no key (the head, the
 * transparency log's checkpoint and its consistency), then the hash rule and what the owner's key
 * or an export adds (recomputing the chain, the prefix check).
 */
export function verifyPage(record: PublicRecord, baseUrl: string): string {
  const org = encodeURIComponent(record.org);
  const agent = encodeURIComponent(record.agent_id);
  const head = record.ledger_head ?? '<head>';
  const body = `
<p><a href="${esc(record.verify_url.replace(/\/verify$/, ''))}">← ${esc(record.name)}</a></p>
<h1>Verifying the record of ${esc(record.name)}</h1>
<p>Steps 1 and 2 need no key and no account: anyone can run them. Steps 3 to 5 recompute the
ledger itself, from an export the organization's key reads.</p>
<h2>1. Note today's head (no key)</h2>
<p>Anyone can read the public record and write down its <code>ledger_head</code>:</p>
<pre>curl -s ${esc(baseUrl)}/public/agents/${esc(org)}/${esc(agent)}</pre>
<p>Today it is <code>${esc(head)}</code> after ${esc(record.ledger_records)} records of this agent.</p>
<h2>2. Check the organization's transparency log (no key)</h2>
<p>Every record of the organization is also a leaf of a Merkle tree (RFC 9162). About every second,
Vigil signs a <em>checkpoint</em> of that tree, its size and root, with its log key. The agent page
runs this check in your browser and remembers the checkpoint it saw; to run it yourself, read:</p>
<pre>curl -s ${esc(baseUrl)}/public/log-key
curl -s ${esc(baseUrl)}/public/checkpoints/${esc(org)}
curl -s "${esc(baseUrl)}/public/proof/${esc(org)}/consistency?from=&lt;M&gt;&amp;to=&lt;N&gt;"</pre>
<ul>
<li><strong>The log key</strong> is a C2SP signed-note verifier key:
<code>&lt;name&gt;+&lt;key id&gt;+&lt;base64(0x01 ‖ 32-byte Ed25519 public key)&gt;</code>, its name
<code>&lt;host&gt;/vigil</code>, its key id the first 4 bytes of SHA-256(name ‖ "\\n" ‖ 0x01 ‖ public key).
Keep a copy: the check is worth as much as your confidence that the key is the log's.</li>
<li><strong>The checkpoint</strong> is a C2SP signed note: three lines <code>&lt;host&gt;/vigil/&lt;org&gt;</code>,
the size (records), the base64 root; a blank line; then signature lines
<code>— &lt;name&gt; &lt;base64(key id ‖ Ed25519 signature)&gt;</code>. Take the line under the key's name
and id, and check its signature over the three lines (each ending in a newline).</li>
<li><strong>The consistency proof</strong> from a checkpoint of M records you kept to today's of N is
<code>{from, to, hashes}</code>; checked as RFC 9162 §2.1.4.2 says, it shows the tree of M records
to be the start of the tree of N: nothing recorded before was changed or removed. Leaves are
<code>SHA-256(0x00 ‖ record bytes)</code> and nodes <code>SHA-256(0x01 ‖ left ‖ right)</code>.</li>
</ul>
<p>A checkpoint of fewer records than one you kept, another root for the same size, a proof that
does not check, or a signature that does not verify means the log was rewritten or forked. The
command-line monitor does all of this and exits with status 2 when it sees one:</p>
<pre>curl -s ${esc(baseUrl)}/public/log-key &gt; vigil-log.vkey
npm run vigil -- monitor ${esc(baseUrl)} ${esc(record.org)} --key @vigil-log.vkey --state seen.json</pre>
<p>Tools that follow C2SP checkpoints and tiles (witnesses, monitors) can read the same log at
<code>${esc(baseUrl)}/public/tiles/${esc(org)}/tile/…</code>.</p>
<h2>3. The hash rule</h2>
<p>Each ledger record is <code>{seq, kind, recorded_at, agent_id, body, content_hash, prev_hash, chain_hash}</code>, with</p>
<pre>content_hash = hex(SHA-256(JCS({seq, kind, recorded_at, agent_id, body})))   JCS = RFC 8785
chain_hash   = hex(SHA-256(prev_hash bytes ‖ content_hash bytes))            raw 32-byte values
prev_hash of seq 1 = 64 zeros; the organization's head = the last chain_hash
Merkle leaf of seq N = SHA-256(0x00 ‖ those same JCS bytes), leaf N-1 of the log's tree</pre>
<h2>4. Recompute the chain (the owner, with a key, or anyone the owner gives an export)</h2>
<pre>curl -s -H "Authorization: Bearer $VIGIL_KEY" "${esc(baseUrl)}/audit/export" &gt; ledger.jsonl
npm run vigil -- verify ledger.jsonl
curl -s -H "Authorization: Bearer $VIGIL_KEY" "${esc(baseUrl)}/audit/${esc(agent)}/verify"</pre>
<p>The offline verifier recomputes every hash and names the first record that does not match.
Any independent RFC 8785 + SHA-256 implementation gives the same result.</p>
<h2>5. The prefix check (with a key)</h2>
<p>A head seen earlier is genuine only if it is the chain hash at some seq of today's chain. Keep the
head you noted and check it later:</p>
<pre>curl -s -H "Authorization: Bearer $VIGIL_KEY" "${esc(baseUrl)}/audit/${esc(agent)}/verify?head=${esc(head)}"</pre>
<p><code>head_check.is_prefix</code> must be <code>true</code>, with the seq at which that head stands.
In an export, the same head must appear as the <code>chain_hash</code> of one record. If it does not, the
ledger was rewritten after you saw it. Without a key, step 2 makes the same check over the whole
organization's log.</p>`;
  return layout(`Verify ${record.name}`, body);
}
