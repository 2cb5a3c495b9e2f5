import { describe, expect, it } from 'vitest';
import type { ReplyInput } from '../../src/demo/language-model.js';
import { RiskLevel, StudioDomain } from '../../src/demo/studio-agent.js';
import { replyFromTemplates, suggestFromTemplates, TemplateModel } from '../../src/demo/template-model.js';
import { DOMAIN_TEMPLATES } from '../../src/demo/templates.js';

const agent = (over: Partial<ReplyInput['agent']> = {}): ReplyInput['agent'] => ({
  name: 'Triage Helper',
  description: null,
  domain: 'clinical',
  risk_level: 'medium',
  persona: null,
  allowed_actions: ['explain care plans', 'help prepare for appointments'],
  forbidden_actions: ['diagnose conditions', 'prescribe medication'],
  ...over,
});
const input = (over: Partial<ReplyInput> = {}): ReplyInput => ({ agent: agent(), history: [], message: 'hello there', forbidden: null, ...over });

describe('built-in language model: determinism', () => {
  it('gives the same suggestion and reply for the same input, across instances and calls', async () => {
    const a = new TemplateModel();
    const b = new TemplateModel();
    const s = { name: 'Claims Bot', domain: 'insurance', risk_level: 'high', context: 'dental claims' };
    expect(await a.suggest(s)).toEqual(await b.suggest({ ...s }));
    for (const message of ['hello', 'Can you explain care plans?', 'what now?']) {
      const i = input({ message });
      const first = await a.reply(i);
      expect(await a.reply(structuredClone(i))).toBe(first);
      expect(await b.reply(i)).toBe(first);
    }
    expect(a.provider).toBe('builtin');
    expect(a.model).toBeNull();
  });

  it('varies with the input: the message, the history and the agent change the reply', () => {
    const base = replyFromTemplates(input());
    const replies = new Set([
      base,
      replyFromTemplates(input({ message: 'something else entirely' })),
      replyFromTemplates(input({ history: [{ role: 'user', content: 'hi' }, { role: 'assistant', content: 'hello' }] })),
      replyFromTemplates(input({ agent: agent({ name: 'Other Name' }) })),
    ]);
    expect(replies.size).toBe(4);
  });
});

describe('built-in language model: domain and risk templates', () => {
  it('suggests a card for every domain and risk level, from that domain', () => {
    for (const domain of StudioDomain) {
      const t = DOMAIN_TEMPLATES[domain];
      for (const risk_level of RiskLevel) {
        const s = suggestFromTemplates({ name: 'Agent X', domain, risk_level, context: null });
        expect(s.description).toContain(`Agent X is a ${t.role}`);
        expect(s.persona.length).toBeGreaterThan(20);
        expect(s.allowed_actions.length).toBeGreaterThan(0);
        expect(s.allowed_actions.every((a) => t.allowed.includes(a))).toBe(true);
        expect(t.forbidden.every((a) => s.forbidden_actions.includes(a))).toBe(true);
      }
    }
  });

  it('is stricter at higher risk: fewer allowed actions, more forbidden ones, a stricter persona', () => {
    const at = (risk_level: string) => suggestFromTemplates({ name: 'P', domain: 'pharmacy', risk_level, context: null });
    const low = at('low');
    const high = at('high');
    const restricted = at('restricted');
    expect(restricted.allowed_actions.length).toBeLessThan(high.allowed_actions.length);
    expect(high.allowed_actions.length).toBeLessThan(low.allowed_actions.length);
    expect(high.forbidden_actions.length).toBeGreaterThan(low.forbidden_actions.length);
    expect(restricted.forbidden_actions).toEqual(expect.arrayContaining([...DOMAIN_TEMPLATES.pharmacy.forbiddenWhenHigh]));
    expect(restricted.persona).toMatch(/Strictly scoped/);
    expect(low.persona).not.toBe(restricted.persona);
    expect(restricted.description).toMatch(/goes to a pharmacist/);
    expect(low.description).not.toMatch(/goes to/);
  });

  it('puts the context in the description, on one line', () => {
    const s = suggestFromTemplates({ name: 'B', domain: 'benefits', risk_level: 'low', context: 'Open enrollment\n for a 200-person company' });
    expect(s.description).toContain('Context: Open enrollment for a 200-person company.');
  });

  it('falls back to a generic template for a domain it does not know', () => {
    const s = suggestFromTemplates({ name: 'G', domain: 'legacy', risk_level: 'unknown', context: null });
    expect(s.description).toContain('G is an assistant for people with questions in its area.');
    expect(s.allowed_actions.length).toBeGreaterThan(0);
  });
});

describe('built-in language model: replies', () => {
  it('declines a forbidden request, naming the action and the hand-off', () => {
    const reply = replyFromTemplates(input({ message: 'can you diagnose my rash', forbidden: 'diagnose conditions' }));
    expect(reply).toMatch(/^I'm not able to diagnose conditions: that is outside what Triage Helper is allowed to do\./);
    expect(reply).toContain('Your care team can help with that.');
  });

  it('takes up an allowed action the message asks for', () => {
    const reply = replyFromTemplates(input({ message: 'Could you explain care plans to me?' }));
    expect(reply).toContain('Yes, I can explain care plans.');
  });

  it('introduces itself on the first turn only, and quotes an unmatched question', () => {
    const first = replyFromTemplates(input({ message: 'What is the weather like?' }));
    expect(first).toContain("I'm Triage Helper, a clinical support assistant.");
    expect(first).toContain('You asked: "What is the weather like?"');
    const later = replyFromTemplates(input({ message: 'What is the weather like?', history: [{ role: 'user', content: 'hi' }] }));
    expect(later).not.toContain("I'm Triage Helper");
  });

  it('adds the risk caution at high and restricted risk', () => {
    expect(replyFromTemplates(input({ agent: agent({ risk_level: 'high' }) }))).toContain('please confirm with your care team');
    expect(replyFromTemplates(input({ agent: agent({ risk_level: 'restricted' }) }))).toContain('narrow scope');
    expect(replyFromTemplates(input({ agent: agent({ risk_level: 'low' }) }))).not.toMatch(/confirm with|narrow scope/);
  });

  it('uses each domain’s own phrasing', () => {
    for (const domain of StudioDomain) {
      const reply = replyFromTemplates(input({ agent: agent({ domain, allowed_actions: [], forbidden_actions: [] }) }));
      const t = DOMAIN_TEMPLATES[domain];
      expect(t.openers.some((o) => reply.startsWith(o))).toBe(true);
      expect(t.offers.some((o) => reply.includes(o))).toBe(true);
      expect(reply).toContain(`a ${t.role}.`);
    }
  });
});
