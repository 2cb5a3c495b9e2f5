import { createHash } from 'node:crypto';
import type { LanguageModel, ReplyInput, SuggestInput, Suggestion } from './language-model.js';
import { matchAction } from './match-action.js';
import type { RiskLevel, StudioDomain } from './studio-agent.js';
import { DOMAIN_TEMPLATES, GENERIC_TEMPLATE, RISK_TONE, type DomainTemplate } from './templates.js';

/**
 * The built-in language model: text composed from templates by domain and risk level. No network,
 * no clock, no randomness: the same input always gives the same output (a choice among phrasings
 * is made by a hash of the input), so demo mode works, and tests hold, on any machine.
 */
export class TemplateModel implements LanguageModel {
  readonly provider = 'builtin';
  readonly model = null;

  suggest(input: SuggestInput): Promise<Suggestion> {
    return Promise.resolve(suggestFromTemplates(input));
  }

  reply(input: ReplyInput): Promise<string> {
    return Promise.resolve(replyFromTemplates(input));
  }
}

export function templateFor(domain: string): DomainTemplate {
  return Object.hasOwn(DOMAIN_TEMPLATES, domain) ? DOMAIN_TEMPLATES[domain as StudioDomain] : GENERIC_TEMPLATE;
}

function toneFor(risk: string): (typeof RISK_TONE)[RiskLevel] {
  return Object.hasOwn(RISK_TONE, risk) ? RISK_TONE[risk as RiskLevel] : RISK_TONE.medium;
}

export function suggestFromTemplates(input: SuggestInput): Suggestion {
  const t = templateFor(input.domain);
  const tone = toneFor(input.risk_level);
  const strict = input.risk_level === 'high' || input.risk_level === 'restricted';
  const context = oneLine(input.context ?? '', 300);
  const description = [
    `${input.name} is ${withArticle(t.role)} for ${t.serves}.`,
    context === '' ? null : `Context: ${sentence(context)}`,
    strict ? `Anything specific to a person goes to ${t.handoff}.` : null,
  ];
  const persona = [tone.persona, 'Speaks plainly, avoids jargon and never claims to be human.', `Hands off to ${t.handoff} when a request is out of scope.`];
  const allowed =
    input.risk_level === 'restricted' ? t.allowed.slice(0, 2) : input.risk_level === 'high' ? t.allowed.slice(0, -1) : [...t.allowed];
  const forbidden = strict ? [...t.forbidden, ...t.forbiddenWhenHigh] : [...t.forbidden];
  return {
    description: description.filter((s) => s !== null).join(' '),
    persona: persona.join(' '),
    allowed_actions: allowed,
    forbidden_actions: forbidden,
  };
}

export function replyFromTemplates(input: ReplyInput): string {
  const { agent } = input;
  const t = templateFor(agent.domain);
  const tone = toneFor(agent.risk_level);
  const h = digest(input);
  const offer = pick(t.offers, h, 1);
  const caution = tone.caution?.replace('{handoff}', t.handoff) ?? null;
  if (input.forbidden !== null) {
    return [
      `I'm not able to ${input.forbidden}: that is outside what ${agent.name} is allowed to do.`,
      `${capitalize(t.handoff)} can help with that.`,
      offer,
    ].join(' ');
  }
  const allowed = matchAction(input.message, agent.allowed_actions);
  const parts = [
    pick(t.openers, h, 0),
    input.history.length === 0 ? `I'm ${agent.name}, ${withArticle(t.role)}.` : null,
    allowed !== null
      ? `Yes, I can ${allowed}. Tell me a little more and I'll take it step by step.`
      : `You asked: "${oneLine(input.message, 80)}". Here is what I can do within my role: ${listOf(agent.allowed_actions.slice(0, 3))}.`,
    offer,
    caution,
  ];
  return parts.filter((s) => s !== null).join(' ');
}

/** A hash of everything the reply depends on: the only source of variety. */
function digest(input: ReplyInput): Buffer {
  const a = input.agent;
  const card = [a.name, a.description, a.domain, a.risk_level, a.persona, a.allowed_actions, a.forbidden_actions];
  const turns = input.history.map((t) => [t.role, t.content]);
  return createHash('sha256').update(JSON.stringify([card, turns, input.message, input.forbidden])).digest();
}

function pick<T>(options: readonly T[], hash: Buffer, salt: number): T {
  return options[hash[salt % hash.length]! % options.length]!;
}

function oneLine(text: string, max: number): string {
  const flat = text.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, max - 1).trimEnd()}…`;
}

function sentence(text: string): string {
  return /[.!?…]$/.test(text) ? text : `${text}.`;
}

function withArticle(noun: string): string {
  return `${/^[aeiou]/i.test(noun) ? 'an' : 'a'} ${noun}`;
}

function capitalize(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}

function listOf(items: readonly string[]): string {
  if (items.length === 0) return 'answer general questions';
  if (items.length === 1) return items[0]!;
  return `${items.slice(0, -1).join(', ')} and ${items[items.length - 1]!}`;
}
