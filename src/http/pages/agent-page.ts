import type { Policy } from '../../domain/policy.js';
import type { PublicRecord } from '../../domain/public-record.js';
import { esc, layout } from './html.js';

const GATE_WORDS: Record<string, string> = {
  pass: 'pass — behaving within policy',
  hold: 'hold — outputs held for review',
  alert: 'alert — held, raised to reviewers',
  collapse: 'collapse — stopped until a reviewer acts',
};

export interface AgentPageLinks {
  /** The record as JSON. */
  jsonUrl: string;
  /** The page's script (log check, local times, copy buttons). */
  script: string;
  /** The gate thresholds of the record's policy; null if that policy is not known here. */
  thresholds: Policy['thresholds'] | null;
}

/** The human-readable page of a public agent record (`{app_url}/a/{org}/{agent_id}`). */
export function agentPage(record: PublicRecord, links: AgentPageLinks): string {
  const { jsonUrl, script, thresholds } = links;
  const gate = record.gate ?? 'none';
  const badge = `<span class="badge gate-${esc(gate)}" id="gate">${esc(record.gate === null ? 'not scored yet' : GATE_WORDS[gate] ?? gate)}</span>`;
  const ownerLinks =
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
<dt>Behavioral Integrity Index</dt><dd id="bii">${bii(record.bii, thresholds)}</dd>
<dt>Ledger records</dt><dd id="records">${esc(record.ledger_records)}</dd>
<dt>Last event</dt><dd id="last-event">${record.last_event_at === null ? 'none yet' : `<time datetime="${esc(record.last_event_at)}">${esc(record.last_event_at)}</time>`}</dd>
<dt>Told it is observed</dt><dd>${record.observed ? 'yes' : 'no'} (it is scored either way)</dd>
<dt>Ledger head</dt><dd>${record.ledger_head === null ? '—' : hash(record.ledger_head, 'ledger head', 'head')}</dd>
<dt>Policy digest</dt><dd>${hash(record.policy_digest, 'policy digest', 'policy')}</dd>
</dl>
<section id="log-check" data-org="${esc(record.org)}">
<h2>The organization's log, checked by your browser</h2>
<div id="log-status" class="log-status" data-verdict="checking" aria-live="polite"><p>Your browser checks this organization's
transparency log here when it runs the page's script: that the log's latest checkpoint is signed by
the published log key, and that the log still holds, unchanged, what you saw on your last visit.</p></div>
</section>
<h2>Owner's links</h2>
<p class="note">Declared by the owner and not checked by Vigil.</p>
${ownerLinks}
<h2>What this record proves</h2>
<p>A registered runtime reporting as this agent has this behavior record, and the organization's
ledger it comes from is unedited: every record carries its own content hash and the previous chain
hash, and the head above commits to the whole history. A head you saw earlier must remain a prefix
of the later chain; otherwise the ledger was rewritten. The organization's transparency log, checked
above, makes the same promise for all its records, and your browser holds it to it on every visit.</p>
<h2>What it does not prove</h2>
<p>It does not prove who operates the agent, who holds its keys, or that an account elsewhere belongs
to it. Actions the runtime never reported are not on the record. The links above are the owner's own
claims and are not checked.</p>
<p><a href="${esc(record.verify_url)}">How to verify this record</a> · <a href="${esc(jsonUrl)}">JSON</a></p>`;
  return layout(`${record.name} — public agent record`, body, script);
}

/** The BII on its 0–1 scale, as a bar and in words, with the pass line when the policy is known. */
function bii(value: number | null, thresholds: Policy['thresholds'] | null): string {
  if (value === null) return 'not scored yet';
  // Truncated, not rounded: the two decimals never show an agent on the other side of the pass line.
  // (The epsilon only absorbs binary error: 0.7 × 100 is 69.999…; 0.69996 still shows 0.69.)
  const shown = (Math.floor(value * 100 + 1e-9) / 100).toFixed(2);
  const line = thresholds === null ? '' : ` — an agent passes at ${esc(thresholds.pass.toFixed(2))} or above`;
  // The bar's colours: green from the pass line, amber from the hold line, red below.
  const scale = thresholds === null ? '' : ` low="${esc(thresholds.hold)}" high="${esc(thresholds.pass)}" optimum="1"`;
  return `<meter min="0" max="1" value="${esc(value)}"${scale} title="${esc(value.toFixed(4))}">${esc(shown)}</meter> <span id="bii-value" title="${esc(value.toFixed(4))}">${esc(shown)}</span> of 1${line}`;
}

/** A long hash shortened to its ends; the full value stays in the title and `data-full` (the script's copy button). */
function hash(value: string, what: string, id: string): string {
  if (value.length <= 24) return `<code id="${id}">${esc(value)}</code>`;
  return `<code id="${id}" class="hash" title="${esc(value)}" data-full="${esc(value)}" data-what="${esc(what)}">${esc(value.slice(0, 8))}…${esc(value.slice(-8))}</code>`;
}

export function notFoundPage(): string {
  return layout('Not found', '<h1>No public agent record here</h1><p>There is no public record at this address.</p>');
}
