/**
 * The language-model port of demo mode: suggestions for new studio agents and chat replies.
 * Adapters: `TemplateModel` (built-in, deterministic, no network) and `OpenAiCompatibleModel`.
 * Either may be slow; an adapter's failure is a rejected promise (the studio then answers with the
 * built-in generator, see `fallback.ts`). Scoring never depends on an adapter: a forbidden request
 * is detected by the studio before the model is asked.
 */
export interface LanguageModel {
  /** Which provider this is, as shown to callers (`builtin`, `openai-compatible`). */
  readonly provider: string;
  /** The model name, when the provider has one. */
  readonly model: string | null;
  suggest(input: SuggestInput): Promise<Suggestion>;
  reply(input: ReplyInput): Promise<string>;
}

export interface SuggestInput {
  name: string;
  domain: string;
  risk_level: string;
  context: string | null;
}

/** The body of POST /studio/agents/suggest. */
export interface Suggestion {
  description: string;
  persona: string;
  allowed_actions: string[];
  forbidden_actions: string[];
}

export const ChatRole = ['user', 'assistant'] as const;
export type ChatRole = (typeof ChatRole)[number];

export interface ChatTurn {
  role: ChatRole;
  content: string;
}

/** What a reply is generated from: the agent's card, the conversation and the new message. */
export interface ReplyInput {
  agent: {
    name: string;
    description: string | null;
    domain: string;
    risk_level: string;
    persona: string | null;
    allowed_actions: readonly string[];
    forbidden_actions: readonly string[];
  };
  history: readonly ChatTurn[];
  message: string;
  /** The forbidden action the message asks for, when it asks for one: the reply must decline it. */
  forbidden: string | null;
}
