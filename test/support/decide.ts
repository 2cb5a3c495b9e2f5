import type { Planned } from '../../src/domain/org-decide.js';
import { evolve, type OrgState, type Refusal } from '../../src/domain/org-state.js';
import { POLICY_V1 } from '../../src/domain/policy.js';

/** Applies what a rule decided to `state`, as the org writer does right after deciding it; returns the decision. */
export function applied<P extends Planned | Refusal>(state: OrgState, planned: P, policy = POLICY_V1): P {
  if (!('ok' in planned)) evolve(state, planned, policy);
  return planned;
}
