import { z } from 'zod';
import { ConfigError } from '../config.js';

/** Demo mode's settings, read from the env given (a pure function: it never reads process.env). */
export interface DemoConfig {
  /** The OpenAI-compatible provider, or null for the built-in generator alone. */
  llm: { url: string; model: string; key: string; timeoutMs: number } | null;
}

export const DEFAULT_LLM_TIMEOUT_MS = 10_000;

const schema = z.object({
  VIGIL_LLM_URL: z
    .url({ protocol: /^https?$/, error: 'an http or https address, e.g. https://api.openai.com/v1' })
    // Credentials in the address would be echoed by fetch's errors into the logs: the key has its own variable.
    .refine((v) => !URL.canParse(v) || (new URL(v).username === '' && new URL(v).password === ''), 'must not contain credentials (user:pass@); put the key in VIGIL_LLM_KEY')
    .optional(),
  VIGIL_LLM_MODEL: z.string().trim().min(1).max(200).optional(),
  VIGIL_LLM_KEY: z.string().min(1).max(4096).optional(),
  VIGIL_LLM_TIMEOUT_MS: z.coerce.number().int().min(100).max(120_000).default(DEFAULT_LLM_TIMEOUT_MS),
});

const TRIO = ['VIGIL_LLM_URL', 'VIGIL_LLM_MODEL', 'VIGIL_LLM_KEY'] as const;

/**
 * VIGIL_LLM_URL, VIGIL_LLM_MODEL and VIGIL_LLM_KEY go together (all three or none);
 * VIGIL_LLM_TIMEOUT_MS bounds one call (default 10 s). An empty variable counts as unset. Errors
 * name the variables, never the key's value.
 */
export function demoConfig(env: NodeJS.ProcessEnv): DemoConfig {
  const present = Object.fromEntries(Object.entries(env).filter(([k, v]) => k.startsWith('VIGIL_LLM_') && v !== undefined && v !== ''));
  const parsed = schema.safeParse(present);
  if (!parsed.success) {
    const lines = parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
    throw new ConfigError(`invalid configuration:\n  ${lines.join('\n  ')}`);
  }
  const e = parsed.data;
  const set = TRIO.filter((name) => e[name] !== undefined);
  if (set.length === 0) return { llm: null };
  if (set.length < TRIO.length) {
    const missing = TRIO.filter((name) => e[name] === undefined);
    throw new ConfigError(`invalid configuration: ${TRIO.join(', ')} go together; missing ${missing.join(', ')}`);
  }
  return { llm: { url: e.VIGIL_LLM_URL!.replace(/\/+$/, ''), model: e.VIGIL_LLM_MODEL!, key: e.VIGIL_LLM_KEY!, timeoutMs: e.VIGIL_LLM_TIMEOUT_MS } };
}
