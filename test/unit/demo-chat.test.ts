import { describe, expect, it } from 'vitest';
import { chatEvent, chatResult, FORBIDDEN_REQUEST_DTI } from '../../src/demo/chat.js';
import { seedAgent } from '../../src/demo/seeds.js';
import { ingestEventBody } from '../../src/domain/schemas.js';

const agent = { ...seedAgent('clinical', '2025-01-01T00:00:00.000Z', 'http://h'), id: 1, created_at: '2025-01-01T00:00:00.000Z' };
const reply = { text: 'Sure, here is how.', provider: 'builtin' };

describe('chat event', () => {
  it('records lengths, the verdict and the provider, never the texts; a valid ingest body', () => {
    const event = chatEvent('studio-clinical', { message: 'hello', history: [], dti: null }, reply, null, 'chat:key_1');
    expect(event).toEqual({
      agent_id: 'studio-clinical',
      event_type: 'output_generated',
      payload: { content_length: 18, message_length: 5, forbidden_request: false, provider: 'builtin' },
      dti: null,
      source: 'service',
      actor: 'chat:key_1',
    });
    expect(ingestEventBody.safeParse(event).success).toBe(true);
  });

  it('raises the dti of a forbidden request to at least 0.9 and names the action; keeps a higher caller dti', () => {
    const raised = chatEvent('a', { message: 'x', history: [], dti: 0.2 }, reply, 'diagnose conditions', 'c');
    expect(raised.dti).toBe(FORBIDDEN_REQUEST_DTI);
    expect(raised.payload).toMatchObject({ forbidden_request: true, matched_action: 'diagnose conditions' });
    expect(chatEvent('a', { message: 'x', history: [], dti: null }, reply, 'x', 'c').dti).toBe(0.9);
    expect(chatEvent('a', { message: 'x', history: [], dti: 0.95 }, reply, 'x', 'c').dti).toBe(0.95);
    expect(chatEvent('a', { message: 'x', history: [], dti: 0.4 }, reply, null, 'c').dti).toBe(0.4);
  });
});

describe('chat result', () => {
  const decision = { gate_status: 'pass' as const, bii: 0.9, composite_trust: 0.9, reason: 'clean output', requires_human_review: false, event_id: 7, action_id: 7 };

  it('answers the reply and the spec 2.10 fields when the gate passes', () => {
    expect(chatResult(agent, 'Sure.', decision)).toEqual({
      response: 'Sure.',
      gate_status: 'pass',
      bii: 0.9,
      composite_trust: 0.9,
      reason: 'clean output',
      requires_human_review: false,
      event_id: 7,
      agent_name: 'Clinical Assistant',
      agent_domain: 'clinical',
      agent_risk: 'high',
    });
  });

  it('withholds the reply when the gate does not pass', () => {
    const held = chatResult(agent, 'Secret advice.', { ...decision, gate_status: 'hold', bii: 0.63, reason: 'dti 0.9', requires_human_review: true });
    expect(held.response).toBe('This reply is held for human review (gate hold: dti 0.9; action 7).');
    expect(held.response).not.toContain('Secret advice');
  });
});
