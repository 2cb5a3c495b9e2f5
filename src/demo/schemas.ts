import { z } from 'zod';
import { ChatRole } from './language-model.js';
import { RiskLevel, StudioDomain, StudioStatus } from './studio-agent.js';

/** Request bodies and query values of the demo routes (spec 4.7, 4.8); strict, like every body. */

const name = z.string().trim().min(1).max(200);
const text = (max: number) => z.string().trim().max(max, `at most ${max} characters`);
const actions = z
  .array(z.string().trim().min(1, 'an action is not empty').max(200, 'an action is at most 200 characters'))
  .max(50, 'at most 50 actions');

export const createStudioAgentBody = z.strictObject({
  name,
  description: text(2000).nullable().default(null),
  domain: z.enum(StudioDomain),
  risk_level: z.enum(RiskLevel).default('medium'),
  persona: text(4000).nullable().default(null),
  allowed_actions: actions.nullable().default(null),
  forbidden_actions: actions.nullable().default(null),
});
export type CreateStudioAgent = z.infer<typeof createStudioAgentBody>;

export const suggestBody = z.strictObject({
  name,
  domain: z.enum(StudioDomain),
  risk_level: z.enum(RiskLevel).default('medium'),
  context: text(2000).nullable().default(null),
});
export type SuggestBody = z.infer<typeof suggestBody>;

export const MAX_HISTORY = 50;

export const chatBody = z.strictObject({
  message: z
    .string()
    .max(4000, 'message is 1 to 4000 characters')
    .refine((m) => m.trim() !== '', 'message is 1 to 4000 characters, not only spaces'),
  history: z
    .array(z.strictObject({ role: z.enum(ChatRole), content: z.string().max(4000, 'at most 4000 characters') }))
    .max(MAX_HISTORY, `at most ${MAX_HISTORY} turns`)
    .default([]),
  dti: z.number().min(0).max(1).nullable().default(null),
});
export type ChatBody = z.infer<typeof chatBody>;

export const statusQuery = z.object({ status: z.enum(StudioStatus) });
