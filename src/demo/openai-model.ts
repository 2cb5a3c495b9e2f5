import { z } from 'zod';
import type { ChatTurn, LanguageModel, ReplyInput, SuggestInput, Suggestion } from './language-model.js';

export interface OpenAiCompatibleConfig {
  /** Base address; requests go to `${url}/chat/completions`. */
  url: string;
  model: string;
  key: string;
  timeoutMs: number;
}

/** Why a provider call failed; the message never contains the key. */
export class LanguageModelError extends Error {
  override name = 'LanguageModelError';
  constructor(
    readonly code: 'timeout' | 'http_status' | 'transport' | 'bad_answer',
    message: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

const completion = z.object({
  choices: z.array(z.object({ message: z.object({ content: z.string() }) })).min(1),
});

const MAX_REPLY = 8000;
const action = z.string().trim().min(1).max(200);
const suggestion = z.object({
  description: z.string().trim().min(1).max(2000),
  persona: z.string().trim().min(1).max(4000),
  allowed_actions: z.array(action).max(20),
  forbidden_actions: z.array(action).max(20),
});

/**
 * An OpenAI-compatible chat completions endpoint (OpenAI, vLLM, Ollama, LM Studio, llama.cpp
 * server, …): one POST of `{model, messages}` per call, `Authorization: Bearer <key>`, bounded by
 * `timeoutMs`. Every failure (timeout, transport, non-2xx, an answer that is not a completion or,
 * for suggest, not the JSON asked for) rejects with a LanguageModelError; there are no retries.
 */
export class OpenAiCompatibleModel implements LanguageModel {
  readonly provider = 'openai-compatible';
  readonly model: string;
  private readonly endpoint: string;

  constructor(private readonly config: OpenAiCompatibleConfig) {
    this.model = config.model;
    this.endpoint = `${config.url.replace(/\/+$/, '')}/chat/completions`;
  }

  async suggest(input: SuggestInput): Promise<Suggestion> {
    const text = await this.complete([
      {
        role: 'system',
        content:
          'You design AI agents for a healthcare governance demo. Answer with one JSON object only, no prose and no code fence: ' +
          '{"description": string, "persona": string, "allowed_actions": [string], "forbidden_actions": [string]}. ' +
          'Actions are short verb phrases such as "explain coverage" or "prescribe medication"; list 3 to 6 of each.',
      },
      {
        role: 'user',
        content: `Name: ${input.name}\nDomain: ${input.domain}\nRisk level: ${input.risk_level}\nContext: ${input.context ?? 'none'}`,
      },
    ]);
    const parsed = suggestion.safeParse(parseJsonObject(text));
    if (!parsed.success) throw new LanguageModelError('bad_answer', 'the suggestion is not the JSON object asked for');
    return parsed.data;
  }

  async reply(input: ReplyInput): Promise<string> {
    const text = (await this.complete([{ role: 'system', content: systemPrompt(input) }, ...input.history, { role: 'user', content: input.message }])).trim();
    if (text === '') throw new LanguageModelError('bad_answer', 'the completion is empty');
    return text.length <= MAX_REPLY ? text : text.slice(0, MAX_REPLY);
  }

  private async complete(messages: readonly (ChatTurn | { role: 'system'; content: string })[]): Promise<string> {
    let res: Response;
    try {
      res = await fetch(this.endpoint, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${this.config.key}` },
        body: JSON.stringify({ model: this.config.model, messages }),
        signal: AbortSignal.timeout(this.config.timeoutMs),
      });
    } catch (error) {
      throw transportError(error, this.config.timeoutMs);
    }
    let body: unknown;
    try {
      if (!res.ok) throw new LanguageModelError('http_status', `the endpoint answered HTTP ${res.status}`);
      body = await res.json();
    } catch (error) {
      if (error instanceof LanguageModelError) throw error;
      throw error instanceof SyntaxError ? new LanguageModelError('bad_answer', 'the answer is not JSON') : transportError(error, this.config.timeoutMs);
    } finally {
      if (res.bodyUsed === false) await res.body?.cancel().catch(() => undefined);
    }
    const parsed = completion.safeParse(body);
    if (!parsed.success) throw new LanguageModelError('bad_answer', 'the answer is not a chat completion');
    return parsed.data.choices[0]!.message.content;
  }
}

function transportError(error: unknown, timeoutMs: number): LanguageModelError {
  const name = error instanceof Error ? error.name : '';
  if (name === 'TimeoutError' || name === 'AbortError') return new LanguageModelError('timeout', `no answer within ${timeoutMs} ms`);
  // undici's message is "fetch failed"; the cause names the socket error (ECONNREFUSED, …).
  const cause = error instanceof Error && error.cause instanceof Error ? `: ${error.cause.message}` : '';
  return new LanguageModelError('transport', `${error instanceof Error ? error.message : 'request failed'}${cause}`);
}

function systemPrompt(input: ReplyInput): string {
  const a = input.agent;
  const lines = [
    `You are ${a.name}, a ${a.domain} agent (risk level ${a.risk_level}).`,
    a.description ?? '',
    a.persona === null ? '' : `Persona: ${a.persona}`,
    a.allowed_actions.length === 0 ? '' : `You may: ${a.allowed_actions.join('; ')}.`,
    a.forbidden_actions.length === 0 ? '' : `You must never: ${a.forbidden_actions.join('; ')}.`,
    input.forbidden === null ? '' : `The user's last message asks you to ${input.forbidden}, which is forbidden: decline briefly and offer a safe alternative.`,
    'Keep answers short (at most 4 sentences). Never claim to be human.',
  ];
  return lines.filter((l) => l !== '').join('\n');
}

/** The first JSON object in the text (models often wrap it in a code fence or a sentence). */
function parseJsonObject(text: string): unknown {
  const start = text.indexOf('{');
  const end = text.lastIndexOf('}');
  if (start < 0 || end <= start) return undefined;
  try {
    return JSON.parse(text.slice(start, end + 1));
  } catch {
    return undefined;
  }
}
