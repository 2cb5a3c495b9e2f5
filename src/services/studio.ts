import { randomBytes } from 'node:crypto';
import type { AgentDirectory } from '../actors/agent-directory.js';
import type { CommandRouter } from '../bus/command-router.js';
import type { Refusal } from '../bus/messages.js';
import { ensureError } from '../errors.js';
import { chatEvent, chatResult, type ChatInput, type ChatResult } from '../demo/chat.js';
import { FallbackModel, type DemoLog, type Generated } from '../demo/fallback.js';
import type { LanguageModel, SuggestInput, Suggestion } from '../demo/language-model.js';
import { matchAction } from '../demo/match-action.js';
import type { CreateStudioAgent } from '../demo/schemas.js';
import { seedAgent } from '../demo/seeds.js';
import { chatEndpoint, seedAgentId, studioAgentId, StudioDomain, transition, type StudioAgent, type StudioStatus } from '../demo/studio-agent.js';
import type { StudioAgentStore } from '../demo/studio-store.js';
import { TemplateModel } from '../demo/template-model.js';

export type { ChatInput, ChatResult, DemoLog, Generated };
export { FORBIDDEN_REQUEST_DTI } from '../demo/chat.js';

export type Outcome<T> = { ok: true; value: T } | Refusal;

const SEED_RETRY_MS = 60_000;

export interface StudioOptions {
  commands: Pick<CommandRouter, 'request'>;
  directory: Pick<AgentDirectory, 'get'>;
  store: StudioAgentStore;
  /** The configured provider; the built-in generator answers whenever it fails. */
  model: LanguageModel;
  /** Base address of the service: deploy endpoints are `${baseUrl}/chat/${agent_id}`. */
  baseUrl: string;
  /** Orgs seeded at start; any other org is seeded on its first studio or chat request. */
  seedOrgs: readonly string[];
  now: () => number;
  log: DemoLog;
  /** The short suffix of created agent_ids (6 random hex digits by default). */
  newSuffix?: () => string;
}

export interface ChatInfo {
  agent_id: string;
  name: string;
  description: string | null;
  domain: string;
  risk_level: string;
  persona: string | null;
  status: StudioStatus;
  gate: string | null;
  bii: number | null;
  deploy_endpoint: string | null;
  provider: string;
  model: string | null;
}

/**
 * Demo mode's studio: studio agents (spec 2.9) and chat with them (2.10). Each studio agent is
 * also a ledger agent of kind `sandbox` with the same agent_id, registered through the command router; each
 * chat reply is an `output_generated` event of it, scored and recorded like any other.
 *
 * Concurrency: writes (seeding, create, status changes) are serialized per org, so ids are
 * allocated without gaps or duplicates and a status check and its change never interleave with
 * another. Reads and chats are not serialized: the org's ledger writer orders the events. One
 * Studio per data dir (embedded mode).
 */
export class Studio {
  private readonly models: FallbackModel;
  private readonly queues = new Map<string, Promise<unknown>>();
  /** Orgs whose seed agents exist (or are being created, or were left out by a plan limit). */
  private readonly seeded = new Map<string, Promise<void>>();
  /** Orgs whose seeding stopped at a plan limit: when to try again (epoch ms). */
  private readonly limited = new Map<string, number>();
  private readonly newSuffix: () => string;

  private constructor(private readonly o: StudioOptions) {
    const builtin = o.model instanceof TemplateModel ? o.model : new TemplateModel();
    this.models = new FallbackModel(o.model, builtin, o.log);
    this.newSuffix = o.newSuffix ?? (() => randomBytes(3).toString('hex'));
  }

  /** Seeds the given orgs (a failure is logged, and retried on that org's next request). */
  static async start(options: StudioOptions): Promise<Studio> {
    const studio = new Studio(options);
    for (const org of options.seedOrgs) await studio.ensureSeeded(org);
    return studio;
  }

  /** Resolves once every write started so far has finished. */
  async close(): Promise<void> {
    await Promise.allSettled([...this.queues.values(), ...this.seeded.values()]);
  }

  async list(org: string): Promise<StudioAgent[]> {
    await this.ensureSeeded(org);
    return this.o.store.list(org).map((a) => this.current(a));
  }

  async get(org: string, agentId: string): Promise<Outcome<StudioAgent>> {
    await this.ensureSeeded(org);
    return this.find(org, agentId);
  }

  async create(org: string, body: CreateStudioAgent): Promise<Outcome<StudioAgent>> {
    await this.ensureSeeded(org);
    return this.exclusive(org, async () => {
      // A suffix already taken (by a studio or a ledger agent) is drawn again, a few times.
      for (let attempt = 0; attempt < 5; attempt++) {
        const agentId = studioAgentId(body.name, this.newSuffix());
        if (this.o.store.get(org, agentId) !== undefined) continue;
        const created = await this.register(org, {
          agent_id: agentId,
          name: body.name,
          description: body.description,
          domain: body.domain,
          risk_level: body.risk_level,
          status: 'draft',
          persona: body.persona,
          allowed_actions: body.allowed_actions ?? [],
          forbidden_actions: body.forbidden_actions ?? [],
          deployed_at: null,
          deploy_endpoint: null,
          is_seed: false,
        });
        if (created.ok || created.code !== 'conflict') return created;
      }
      return { ok: false, code: 'conflict', message: `no free agent_id for ${JSON.stringify(body.name)}; try again` };
    });
  }

  deploy(org: string, agentId: string): Promise<Outcome<StudioAgent>> {
    return this.setStatus(org, agentId, 'deployed');
  }

  /** Retiring also retires the ledger agent (an `agent` record with is_active false). */
  async setStatus(org: string, agentId: string, status: StudioStatus): Promise<Outcome<StudioAgent>> {
    await this.ensureSeeded(org);
    return this.exclusive(org, async () => {
      const found = this.find(org, agentId);
      if (!found.ok) return found;
      const moved = transition(found.value, status, this.iso(), this.o.baseUrl);
      if (!moved.ok) return { ok: false, code: moved.code, message: moved.message };
      if (!moved.changed) return { ok: true, value: moved.agent };
      if (status === 'retired') {
        const reply = await this.o.commands.request({ type: 'agent.update', org, agentId, changes: { is_active: false } });
        // Already retired in the ledger (by an admin): the studio follows.
        if (!reply.ok && reply.code !== 'conflict') return reply;
      }
      await this.o.store.put(org, moved.agent);
      return { ok: true, value: moved.agent };
    });
  }

  async suggest(org: string, input: SuggestInput): Promise<Generated<Suggestion>> {
    await this.ensureSeeded(org);
    return this.models.suggest(input);
  }

  /**
   * Generates a reply and records it as an `output_generated` event (see chat.ts: a forbidden
   * request raises the dti; a reply the gate does not pass is withheld).
   */
  async chat(org: string, agentId: string, input: ChatInput, actor: string): Promise<Outcome<{ result: ChatResult; generated: Generated<string> }>> {
    await this.ensureSeeded(org);
    const found = this.find(org, agentId);
    if (!found.ok) return found;
    const agent = found.value;
    if (agent.status !== 'deployed') {
      return { ok: false, code: 'conflict', message: `studio agent ${agentId} is ${agent.status}; only a deployed agent chats` };
    }
    const forbidden = matchAction(input.message, agent.forbidden_actions);
    const card = {
      name: agent.name,
      description: agent.description,
      domain: agent.domain,
      risk_level: agent.risk_level,
      persona: agent.persona,
      allowed_actions: agent.allowed_actions,
      forbidden_actions: agent.forbidden_actions,
    };
    const generated = await this.models.reply({ agent: card, history: input.history, message: input.message, forbidden });
    const event = chatEvent(agentId, input, { text: generated.value, provider: generated.provider }, forbidden, actor);
    const reply = await this.o.commands.request({ type: 'event.ingest', org, event });
    if (!reply.ok) return reply;
    const result = chatResult(agent, generated.value, reply.value);
    return { ok: true, value: { result, generated } };
  }

  async info(org: string, agentId: string): Promise<Outcome<ChatInfo>> {
    await this.ensureSeeded(org);
    const found = this.find(org, agentId);
    if (!found.ok) return found;
    const a = found.value;
    const ledger = this.o.directory.get(org, agentId);
    return {
      ok: true,
      value: {
        agent_id: a.agent_id,
        name: a.name,
        description: a.description,
        domain: a.domain,
        risk_level: a.risk_level,
        persona: a.persona,
        status: a.status,
        gate: ledger?.gate ?? null,
        bii: ledger?.bii ?? null,
        deploy_endpoint: a.deploy_endpoint,
        provider: this.models.primary.provider,
        model: this.models.primary.model,
      },
    };
  }

  private find(org: string, agentId: string): Outcome<StudioAgent> {
    const agent = this.o.store.get(org, agentId);
    return agent === undefined ? { ok: false, code: 'not_found', message: `studio agent ${agentId} not found` } : { ok: true, value: this.current(agent) };
  }

  /** The endpoint follows the service's address: one stored under an earlier one (another port) is stale. */
  private current(agent: StudioAgent): StudioAgent {
    return agent.deploy_endpoint === null ? agent : { ...agent, deploy_endpoint: chatEndpoint(this.o.baseUrl, agent.agent_id) };
  }

  /** Registers the ledger agent, then stores the studio agent with the next id (caller holds the org). */
  private async register(org: string, fields: Omit<StudioAgent, 'id' | 'created_at'>): Promise<Outcome<StudioAgent>> {
    const reply = await this.o.commands.request({
      type: 'agent.register',
      org,
      agent: { agent_id: fields.agent_id, name: fields.name, kind: 'sandbox', observed: true },
    });
    if (!reply.ok) return reply;
    const agent: StudioAgent = { id: this.nextId(org), ...fields, created_at: reply.value.created_at };
    await this.o.store.put(org, agent);
    return { ok: true, value: agent };
  }

  private nextId(org: string): number {
    return this.o.store.list(org).reduce((max, a) => Math.max(max, a.id), 0) + 1;
  }

  /**
   * Creates the org's missing seed agents, once per org and process. A failure is retried on the
   * next request; a plan limit (which retrying will not lift before the plan changes or an agent
   * is retired) leaves the seeds that fit, is logged once and retried at most once a minute.
   */
  private ensureSeeded(org: string): Promise<void> {
    let seeding = this.seeded.get(org);
    const retryAt = this.limited.get(org);
    if (seeding !== undefined && (retryAt === undefined || this.o.now() < retryAt)) return seeding;
    // Pushed back now, so that concurrent requests share this retry.
    if (retryAt !== undefined) this.limited.set(org, this.o.now() + SEED_RETRY_MS);
    seeding = this.exclusive(org, () => this.seed(org)).then(
      (limit) => {
        if (limit !== null && !this.limited.has(org)) {
          this.o.log.warn({ org, error: limit.message }, 'demo: the plan limit leaves some seed agents out; retried at most once a minute');
        }
        if (limit === null) this.limited.delete(org);
        else this.limited.set(org, this.o.now() + SEED_RETRY_MS);
      },
      (thrown: unknown) => {
        this.seeded.delete(org);
        this.o.log.warn({ org, err: ensureError(thrown) }, 'demo: seeding studio agents failed; retried on the next request');
      },
    );
    this.seeded.set(org, seeding);
    return seeding;
  }

  /** Registers the missing seed agents; the plan-limit refusal that left some out, or null. */
  private async seed(org: string): Promise<Refusal | null> {
    let limit: Refusal | null = null;
    for (const domain of StudioDomain) {
      const agentId = seedAgentId(domain);
      if (this.o.store.get(org, agentId) !== undefined) continue;
      const at = this.iso();
      const seedFields = seedAgent(domain, at, this.o.baseUrl);
      const created = await this.register(org, seedFields);
      if (created.ok) continue;
      if (created.code === 'plan_limit') {
        limit ??= created;
        continue;
      }
      if (created.code !== 'conflict') throw new Error(`seed agent ${agentId}: ${created.message}`);
      // The ledger agent exists (a crash between its registration and the studio write, or an
      // agent registered by hand under that id): adopt it, retired if the ledger says so.
      const ledger = this.o.directory.get(org, agentId);
      const status: StudioStatus = ledger?.is_active === false ? 'retired' : 'deployed';
      await this.o.store.put(org, { ...seedFields, status, id: this.nextId(org), created_at: ledger?.created_at ?? at });
    }
    return limit;
  }

  private exclusive<T>(org: string, work: () => Promise<T>): Promise<T> {
    const previous = this.queues.get(org) ?? Promise.resolve();
    const next = previous.then(work, work);
    const settled = next.catch(() => undefined);
    this.queues.set(org, settled);
    void settled.then(() => {
      if (this.queues.get(org) === settled) this.queues.delete(org);
    });
    return next;
  }

  private iso(): string {
    return new Date(this.o.now()).toISOString();
  }
}
