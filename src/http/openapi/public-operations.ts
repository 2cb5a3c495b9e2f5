import { z } from 'zod';
import { CACHED_HEADERS, CHECKPOINT, errors, IF_NONE_MATCH, intParam, PUBLIC, PUBLIC_HEADERS } from './common.js';
import type { Operation } from './operation.js';
import { consistencyProof, publicList, publicRecord } from './responses.js';

const ORG = 'The org\'s slug';
const NOT_SHOWN =
  'No key: a key sent is refused (400). 404, one answer for every reason (no such org or agent, not public, retired, an org without a public agent), so that it says nothing of what exists.';
const NOT_MODIFIED = { description: 'Not modified: the If-None-Match sent is the current ETag (no body)', headers: CACHED_HEADERS };
const PUBLIC_LOG = 'For an org with a public agent (others 404, exactly as the public list does); no key, the public rate limit.';

/** A human page (`/a/…`): HTML, its 404 an HTML page too (not the JSON error body). */
function page(summary: string, description: string, headers: Record<string, string>): Operation {
  const all = { ...PUBLIC_HEADERS, 'Cache-Control': '`public, max-age=60`', ...headers };
  return {
    summary,
    description: `${description} Same rules as the public JSON (no key, the public rate limit).`,
    tag: 'Pages',
    params: { org: ORG, agent_id: 'The agent\'s id' },
    responses: {
      200: { description: 'The page', contentType: 'text/html; charset=utf-8', headers: all },
      404: { description: 'Not found, as a page for humans (no public agent record here)', contentType: 'text/html; charset=utf-8', headers: all },
    },
    errors: [...PUBLIC],
  };
}

const CSP = { 'Content-Security-Policy': 'Nothing runs but this origin\'s own files' };

/** Public reads (no key): agent records, the transparency log of public orgs, and the human pages. */
export const PUBLIC_OPERATIONS: Readonly<Record<string, Operation>> = {
  'GET /public/agents/:org/:agent_id': {
    summary: 'A public agent record',
    description: `The reduced record of an agent its owner made public: no event content, payload, score history, review note or configuration. ${NOT_SHOWN}`,
    tag: 'Public',
    params: { org: ORG, agent_id: 'The agent\'s id' },
    headers: IF_NONE_MATCH,
    responses: { 200: { description: 'The record', schema: publicRecord, headers: CACHED_HEADERS }, 304: NOT_MODIFIED },
    errors: errors(PUBLIC, 404),
  },
  'GET /public/agents/:org': {
    summary: 'An org\'s public agents',
    description: `The org's public, active agents by agent_id. ${NOT_SHOWN}`,
    tag: 'Public',
    params: { org: ORG },
    headers: IF_NONE_MATCH,
    query: z.object({ limit: intParam(1, 100, 50, 'Agents in the page'), offset: intParam(0, 1e9, 0, 'Agents skipped') }),
    responses: { 200: { description: 'A page of records; `total` counts them all', schema: publicList, headers: CACHED_HEADERS }, 304: NOT_MODIFIED },
    errors: errors(PUBLIC, 404),
  },
  'OPTIONS /public/agents/:org/:agent_id': {
    summary: 'CORS preflight',
    tag: 'Public',
    params: { org: ORG, agent_id: 'The agent\'s id' },
    responses: { 204: { description: 'Any origin may GET it', headers: preflightHeaders() } },
    errors: [],
  },
  'OPTIONS /public/agents/:org': {
    summary: 'CORS preflight',
    tag: 'Public',
    params: { org: ORG },
    responses: { 204: { description: 'Any origin may GET it', headers: preflightHeaders() } },
    errors: [],
  },

  'GET /public/log-key': {
    summary: 'The log\'s public key',
    description: 'The Ed25519 key that signs every org\'s checkpoints and receipts, as a C2SP signed-note verifier key: `<name>+<8 hex key id>+<base64(0x01 ‖ public key)>`. No key, the public rate limit.',
    tag: 'Transparency log',
    responses: { 200: { description: 'The verifier key and a newline', contentType: 'text/plain; charset=utf-8', headers: PUBLIC_HEADERS } },
    errors: [...PUBLIC],
  },
  'GET /public/checkpoints/:org': {
    summary: 'A public org\'s latest checkpoint',
    description: `${PUBLIC_LOG} 503 while the tree is rebuilt after a start.`,
    tag: 'Transparency log',
    params: { org: ORG },
    responses: { 200: { description: CHECKPOINT, contentType: 'text/plain; charset=utf-8', headers: { ...PUBLIC_HEADERS, 'Cache-Control': '`no-cache`' } } },
    errors: errors(PUBLIC, 404, 503),
  },
  'GET /public/tiles/:org/checkpoint': {
    summary: 'A public org\'s latest checkpoint (tlog-tiles)',
    description: `The same as GET /public/checkpoints/{org}, where C2SP tlog-tiles clients look for it. ${PUBLIC_LOG}`,
    tag: 'Transparency log',
    params: { org: ORG },
    responses: { 200: { description: CHECKPOINT, contentType: 'text/plain; charset=utf-8', headers: { ...PUBLIC_HEADERS, 'Cache-Control': '`no-cache`' } } },
    errors: errors(PUBLIC, 404, 503),
  },
  'GET /public/tiles/:org/tile/*': {
    summary: 'A Merkle tile (C2SP tlog-tiles)',
    description: `The hashes of tree level 8·L, tile N, as C2SP tlog-tiles serves them; a full tile never changes, nor does a partial one of width W. A path not in its one canonical spelling, or a tile the tree does not hold yet, is not found. ${PUBLIC_LOG}`,
    tag: 'Transparency log',
    params: { org: ORG, '*': '`<L>/<N>` or `<L>/<N>.p/<W>`: N in groups of three digits, all but the last prefixed `x` (`0/x001/234`), W from 1 to 255' },
    responses: {
      200: {
        description: 'The tile: 32-byte hashes, one after the other',
        contentType: 'application/octet-stream',
        headers: { ...PUBLIC_HEADERS, 'Cache-Control': '`public, max-age=31536000, immutable`' },
      },
    },
    errors: errors(PUBLIC, 404, 503),
  },
  'GET /public/proof/:org/consistency': {
    summary: 'A public org\'s consistency proof',
    description: `As GET /audit/proof/consistency, for anyone: monitors check that the log only grew between two checkpoints. ${PUBLIC_LOG}`,
    tag: 'Transparency log',
    params: { org: ORG },
    query: z.object({ from: intParam(1, 1e15, null, 'The older size, at most `to`'), to: intParam(1, 1e15, null, 'The newer size, at most the tree\'s') }),
    responses: { 200: { description: 'The proof', schema: consistencyProof, headers: PUBLIC_HEADERS } },
    errors: errors(PUBLIC, 404, 503),
  },

  'GET /a/:org/:agent_id': page('An agent\'s public page', 'The public record for humans; its script checks the org\'s checkpoint signature and log consistency in the browser.', CSP),
  'GET /a/:org/:agent_id/verify': page('How to verify an agent\'s record', 'Verification instructions for the public record, step by step.', CSP),
  'GET /assets/log-check.js': {
    summary: 'The agent page\'s script',
    description: 'A static file, the same for everyone: no rate limit, and a key sent is not read.',
    tag: 'Pages',
    responses: { 200: { description: 'JavaScript', contentType: 'application/javascript; charset=utf-8', headers: { 'Cache-Control': '`public, max-age=604800`' } } },
    errors: [],
  },
  'GET /pricing': {
    summary: 'The pricing page',
    tag: 'Pages',
    responses: { 200: { description: 'The plans, for humans', contentType: 'text/html; charset=utf-8', headers: { 'Cache-Control': '`public, max-age=300`' } } },
    errors: [],
  },
};

function preflightHeaders(): Record<string, string> {
  return {
    'Access-Control-Allow-Origin': '`*`',
    'Access-Control-Allow-Methods': '`GET, OPTIONS`',
    'Access-Control-Allow-Headers': '`If-None-Match, Content-Type`',
    'Access-Control-Max-Age': '`86400`',
  };
}
