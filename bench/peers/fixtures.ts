/** What both bench peers answer: fixed bodies, shaped like Vigil's answers on the same routes. */
export const DECISION = JSON.stringify({
  event_id: 1,
  action_id: 1,
  gate_status: 'pass',
  bii: 0.9,
  composite_trust: 0.9,
  reason: 'ok',
  requires_human_review: false,
});

/** A fixed public agent record (~450 bytes), shaped like Vigil's GET /public/agents/:org/:agent_id. */
export const PUBLIC_RECORD = JSON.stringify({
  org: 'bench',
  agent_id: 'bench-agent',
  name: 'Bench Support Assistant',
  kind: 'assistant',
  gate: 'pass',
  bii: 0.9,
  ledger_records: 1024,
  ledger_head: 'fe14010b4fe83303852f0467c919ef9a7ca089b91e96e3aad7d426dd87079297',
  last_event_at: '2025-01-01T00:00:00.000Z',
  observed: true,
  policy_digest: '823412d1eacb67956220e532959f0104603057c88704863ca38e7cd188fda812',
  public_links: [],
  verify_url: 'https://vigil.example.com/a/bench/bench-agent/verify',
});
