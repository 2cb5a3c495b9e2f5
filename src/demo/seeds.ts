import { chatEndpoint, seedAgentId, type StudioAgent, type StudioDomain } from './studio-agent.js';
import { suggestFromTemplates, templateFor } from './template-model.js';

/**
 * A seed agent as first created (without its id and creation time): one per domain, agent_id
 * `studio-<domain>`, deployed at `at`, its card from the built-in templates. Pure.
 */
export function seedAgent(domain: StudioDomain, at: string, baseUrl: string): Omit<StudioAgent, 'id' | 'created_at'> {
  const t = templateFor(domain);
  const card = suggestFromTemplates({ name: t.seedName, domain, risk_level: t.seedRisk, context: null });
  const agentId = seedAgentId(domain);
  return {
    agent_id: agentId,
    name: t.seedName,
    description: card.description,
    domain,
    risk_level: t.seedRisk,
    status: 'deployed',
    persona: card.persona,
    allowed_actions: card.allowed_actions,
    forbidden_actions: card.forbidden_actions,
    deployed_at: at,
    deploy_endpoint: chatEndpoint(baseUrl, agentId),
    is_seed: true,
  };
}
