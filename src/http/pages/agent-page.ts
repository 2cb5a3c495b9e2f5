import type { PublicRecord } from '../../domain/public-record.js';
import { esc, layout } from './html.js';

const GATE_WORDS: Record<string, string> = {
  pass: 'pass — behaving within policy',
  hold: 'hold — outputs held for review',
  alert: 'alert — held, raised to reviewers',
  collapse: 'collapse — stopped until a reviewer acts',
};

/** The human-readable page of a public agent record (`{app_url}/a/{org}/{agent_id}`). */
export function agentPage(record: PublicRecord, jsonUrl: string): string {
  const gate = record.gate ?? 'none';
  const badge = `<span class="badge gate-${esc(gate)}" id="gate">${esc(record.gate === null ? 'not scored yet' : GATE_WORDS[gate] ?? gate)}</span>`;
  const links =
    record.public_links.length === 0
      ? '<p>The owner has declared no links.</p>'
      : `<ul id="links">${record.public_links
          .map((l) => `<li>${esc(l.kind)}: <a href="${esc(l.url)}" rel="nofollow noopener noreferrer">${esc(l.url)}</a></li>`)
          .join('')}</ul>`;
  const body = `
<p>Public agent record · organization <code>${esc(record.org)}</code></p>
<h1 id="name">${esc(record.name)}</h1>
<p>${badge}</p>
<dl>
<dt>Agent id</dt><dd><code>${esc(record.agent_id)}</code></dd>
<dt>Kind</dt><dd id="kind">${esc(record.kind)}</dd>
<dt>Behavioral Integrity Index</dt><dd id="bii">${record.bii === null ? '—' : esc(record.bii.toFixed(4))}</dd>
<dt>Ledger records</dt><dd id="records">${esc(record.ledger_records)}</dd>
<dt>Last event</dt><dd id="last-event">${esc(record.last_event_at ?? 'none yet')}</dd>
<dt>Told it is observed</dt><dd>${record.observed ? 'yes' : 'no'} (it is scored either way)</dd>
<dt>Ledger head</dt><dd><code id="head">${esc(record.ledger_head ?? '—')}</code></dd>
<dt>Policy digest</dt><dd><code>${esc(record.policy_digest)}</code></dd>
</dl>
<h2>Owner's links</h2>
<p class="note">Declared by the owner and not checked by Vigil.</p>
${links}
<h2>What this record proves</h2>
<p>A registered runtime reporting as this agent has this behavior record, and the organization's
ledger it comes from is unedited: every record carries its own content hash and the previous chain
hash, and the head above commits to the whole history. A head you saw earlier must remain a prefix
of the later chain; otherwise the ledger was rewritten.</p>
<h2>What it does not prove</h2>
<p>It does not prove who operates the agent, who holds its keys, or that an account elsewhere belongs
to it. Actions the runtime never reported are not on the record. The links above are the owner's own
claims and are not checked.</p>
<p><a href="${esc(record.verify_url)}">How to verify this record</a> · <a href="${esc(jsonUrl)}">JSON</a></p>`;
  return layout(`${record.name} — public agent record`, body);
}

export function notFoundPage(): string {
  return layout('Not found', '<h1>No public agent record here</h1><p>There is no public record at this address.</p>');
}
