import { randomBytes } from 'node:crypto';
import { hashKey } from '../domain/keys.js';
import { describePhi, findPhi, PhiIdentifier } from './phi.js';
import { RUBRIC_V1 } from './rubric.js';
import { issueKeyBody, scoreRecordBody } from './schemas.js';
import { scoreRecord } from './score.js';
import { bearerSandboxKey, formatSandboxKey, SANDBOX_LIMIT } from './sandbox-keys.js';
import { VigilError } from '../errors.js';
import type { ScoringKeyStore } from './key-store.js';
import type { Route } from '../http/router.js';
import { validate } from '../http/validate.js';

export interface RecordScoringDeps {
  store: ScoringKeyStore;
  now: () => number;
}

const DAY_MS = 86_400_000;

/**
 * The record-scoring interface under /api/v1 (spec 2.11, 4.9): sandbox keys issued on request and
 * the score route. Its keys are its own (not the service's `vgl_` keys), so every route is mounted
 * with auth `none` and reads its Bearer key itself. Nothing about a scored record is stored; the
 * only write is the key's use count, taken after the record was accepted, so a refused request
 * (400, 401, 422, 429) costs nothing.
 */
export function recordScoringRoutes(deps: RecordScoringDeps): Route[] {
  return [
    {
      method: 'post',
      path: '/api/v1/keys',
      auth: 'none',
      handler: async ({ body }) => {
        const { email } = validate(issueKeyBody, body);
        const key = formatSandboxKey(randomBytes(32));
        const created_at = new Date(deps.now()).toISOString();
        const outcome = await deps.store.issue({ hash: hashKey(key), email, limit: SANDBOX_LIMIT, used: 0, created_at });
        if (!outcome.ok) throw new VigilError('conflict', `a sandbox key was already issued for ${email}: one key per e-mail address`);
        return { status: 201, body: { key, email, limit: SANDBOX_LIMIT, remaining: SANDBOX_LIMIT } };
      },
    },
    {
      method: 'post',
      path: '/api/v1/score',
      auth: 'none',
      handler: async ({ headers, body }) => {
        const hash = authenticate(deps.store, headers.authorization ?? '');
        const record = validate(scoreRecordBody, body);
        const today = utcDay(deps.now());
        if (record.vintage > utcDay(deps.now() + DAY_MS)) {
          throw new VigilError('validation_failed', 'invalid body: vintage', [{ path: 'vintage', message: `vintage ${record.vintage} is in the future` }]);
        }
        const findings = findPhi(record);
        if (findings.length > 0) {
          const details = findings.map((f) => ({ path: f.path, message: `looks like ${PhiIdentifier[f.identifier]} (by ${f.by === 'name' ? 'field name' : 'value'})` }));
          throw new VigilError('phi_refused', `sandbox data only: the record carries personal health information at ${describePhi(findings)}; it was not scored or stored`, details);
        }
        const sidecar = scoreRecord(record, RUBRIC_V1, today);
        const use = await deps.store.use(hash);
        if (!use.ok) throw use.reason === 'exhausted' ? exhausted() : unknownKey();
        return {
          body: { sidecar_id: 'sc_' + randomBytes(16).toString('base64url'), ...sidecar },
          headers: { 'x-sandbox-limit': String(use.used + use.remaining), 'x-sandbox-remaining': String(use.remaining) },
        };
      },
    },
  ];
}

/** The key's hash, or a 401 (no or unknown key) or 429 (allowance spent) before the body is judged. */
function authenticate(store: ScoringKeyStore, authorization: string): string {
  const key = bearerSandboxKey(authorization);
  if (key === null) {
    throw new VigilError('unauthorized', 'send a sandbox key as Authorization: Bearer <key> (POST /api/v1/keys issues one)');
  }
  const hash = hashKey(key);
  const record = store.get(hash);
  if (record === undefined) throw unknownKey();
  if (record.used >= record.limit) throw exhausted(record.limit);
  return hash;
}

function unknownKey(): VigilError {
  return new VigilError('unauthorized', 'unknown sandbox key');
}

/** No Retry-After: a sandbox allowance never resets, so there is no time at which a retry would succeed. */
function exhausted(limit = SANDBOX_LIMIT): VigilError {
  return new VigilError('quota_exceeded', `this sandbox key has used all ${limit} scoring requests; sandbox keys do not reset`);
}

function utcDay(ms: number): string {
  return new Date(ms).toISOString().slice(0, 10);
}
