import { z } from 'zod';
import { exportBundleBody, ingestEventBody } from '../../domain/schemas.js';
import { exportQuery, verifyQuery } from '../routes/audit.js';
import { batchBody } from '../routes/ingest.js';
import { AUDIT_READ, BODY, CHECKPOINT, errors, intParam, READ, SCOPED, WRITE } from './common.js';
import type { Operation } from './operation.js';
import { batchResults, bundle, consistencyProof, exportEntry, inclusionProof, ingestResult, verifyResult } from './responses.js';

const PREFER_RECEIPT = {
  Prefer: { description: '`receipt`: each result carries `receipt`, a record of its place in the log signed by the log key (RFC 7240 syntax)' },
};
const RECEIPT_APPLIED = { 'Preference-Applied': '`receipt` when the results carry receipts' };
const TREE_SIZE = 1e15;

const STREAM = `A WebSocket (RFC 6455) on which a runtime sends batches of events and gets their results, for the throughput of one connection rather than a request per batch.

**Upgrade.** \`GET /events/stream\` with \`Upgrade: websocket\` and \`Authorization: Bearer <key>\` (scope \`events:write\`); auth is checked on this request, and a refusal (401, 403, 429) is answered as HTTP with the JSON error body, without upgrading. \`Sec-WebSocket-Protocol\`: \`vigil.v1+json\` (text frames of JSON; the default when none is offered) or \`vigil.v1+msgpack\` (binary frames of msgpack); offering only others is a 400. \`Prefer: receipt\` on the upgrade request gives every result its signed receipt.

**Client frame**: \`{"id": …, "events": [event, …]}\`: \`id\` a string (at most 256 characters) or an integer of the client's choosing; 1 to 1000 events, each as the body of \`POST /events\` (with its own \`idempotency_key\` to make retries safe).

**Server frame**, one per client frame, in the order the frames came, once every accepted event of it is durable: \`{"id": …, "results": […]}\`, the results as \`POST /events/batch\` gives them (a result, or \`{"error": {…}}\` for that event alone).

**A bad frame** is answered \`{"id": <its id, or null>, "error": {"code", "message", "details"?, "retry_after_seconds"?}}\` and the connection stays open: \`bad_request\` (not one JSON text frame, or one msgpack binary frame, as the protocol says), \`validation_failed\` (not \`{id, events}\`), \`overloaded\` (over 1 MiB, or VIGIL_STREAM_MAX_FRAMES frames (64 by default) already await their answers), \`rate_limited\` (the frame's events do not fit in what is left of the key's VIGIL_KEY_RATE_LIMIT this second; the upgrade counted one request, each frame counts its events): send it again later, after \`retry_after_seconds\` when given, with the same idempotency keys. A refused frame writes nothing.

**The key** is checked again before every frame and every 500 ms: once it is revoked, the stream writes nothing more and is closed with 4401 \`key revoked\` (within about a second when idle); a key without \`events:write\` would be closed with 4403.

**Closes**: 4401 the key was revoked; 4403 the key lacks \`events:write\`; a message over 2 MiB (1009); a client that leaves 1024 answers unread (1008). After VIGIL_STREAM_IDLE_SECONDS (120 by default) without traffic the server pings, and closes a peer that does not answer.`;

/** An audit read's operation: its description says who may call it. */
function audit(op: Operation): Operation {
  return { ...op, description: op.description === undefined ? AUDIT_READ : `${op.description}\n\n${AUDIT_READ}` };
}

/** Events (ingest one, a batch, a stream), audit reads, the transparency log and exports. */
export const LEDGER_OPERATIONS: Readonly<Record<string, Operation>> = {
  'POST /events': {
    summary: 'Ingest an event',
    description:
      'One event in, one gate decision out, one ledger record written: a 200 means the record is committed (and, with VIGIL_DURABILITY=sync, the default, fsynced). The agent must be registered (404) and active (409).\n\n**Idempotency**: with a key (the `Idempotency-Key` header or `idempotency_key`, equal if both are sent) a later event of the org with the same key records nothing and gets the first result again, or 409 `idempotency_conflict` if it asks for something else. Keys never expire. A refused event (404, 429, 503) used no key.\n\n429 `quota_exceeded` past the plan\'s monthly events (Retry-After: the next UTC month).',
    tag: 'Events',
    body: ingestEventBody,
    headers: {
      'Idempotency-Key': { description: '1-128 of A-Z a-z 0-9 . _ : -, the event\'s idempotency key (as `idempotency_key` in the body)' },
      ...PREFER_RECEIPT,
    },
    responses: { 200: { description: 'The gate decision, once the record is committed', schema: ingestResult, headers: RECEIPT_APPLIED } },
    errors: errors(SCOPED, BODY, WRITE, 404, 409),
  },
  'POST /events/batch': {
    summary: 'Ingest a batch of events',
    description:
      '1 to 1000 events, each decided alone as by POST /events and answered together once every accepted one is durable. One event\'s refusal (invalid, unknown agent, idempotency conflict, quota…) is its own `{error}` result; the others are not affected. Only a request that is not `{events: [...]}` is refused whole (400, nothing written).\n\nWith VIGIL_KEY_RATE_LIMIT, the batch counts its events (not its request) against the key\'s rate: past it, 429 `rate_limited` with Retry-After, nothing written. A batch of more events than the limit is taken from an empty window, which it then holds for ceil(events / limit) seconds.',
    tag: 'Events',
    body: batchBody,
    headers: PREFER_RECEIPT,
    responses: { 200: { description: 'A result per event, in request order', schema: batchResults, headers: RECEIPT_APPLIED } },
    errors: errors(SCOPED, BODY),
  },
  'GET /events/stream': {
    summary: 'Ingest over a WebSocket',
    description: STREAM,
    tag: 'Events',
    headers: {
      'Sec-WebSocket-Protocol': { description: '`vigil.v1+json` (default) or `vigil.v1+msgpack`' },
      ...PREFER_RECEIPT,
    },
    responses: { 101: { description: 'Switching Protocols: the WebSocket is open', headers: { 'Sec-WebSocket-Protocol': 'The subprotocol chosen (absent when none was offered: JSON)' } } },
    errors: errors(SCOPED, 400),
  },

  'GET /audit/export': audit({
    summary: 'Export the ledger (JSON Lines)',
    description:
      'The org\'s ledger records with seq in (since_seq, until_seq], streamed one JSON record a line: `{seq, kind, recorded_at, agent_id, body, content_hash, prev_hash, chain_hash}` (DESIGN §4). An until_seq past the head is cut at the head. ' +
      'A damaged row (one that cannot be read) ends the export, whoever\'s it is: the records before it, then one trailer line that is not a record, `{"error":{"code":"ledger_damaged","message","details":[{"path":"ledger.<seq>","message"}]}}`, and nothing after. Met before the first record, it is a 503 `ledger_damaged` with that body instead.',
    tag: 'Audit',
    query: z.object({
      since_seq: exportQuery.shape.since_seq.describe('Exclusive: records after this seq; default 0 (from the first)'),
      until_seq: exportQuery.shape.until_seq.describe('Inclusive, not below since_seq; default the head'),
      agent_id: exportQuery.shape.agent_id.describe('Only this agent\'s records'),
    }),
    responses: {
      200: {
        description: 'JSON Lines, one ledger record a line (the last may be the `ledger_damaged` trailer, see above)',
        contentType: 'application/x-ndjson',
        headers: { 'X-Vigil-Ledger-Head-Seq': 'The org\'s last seq when the export began' },
      },
    },
    errors: errors(SCOPED, READ, 400),
  }),
  'GET /audit/:agent_id/verify': audit({
    summary: 'Verify the chain',
    description:
      'Recomputes every content and chain hash of the org\'s ledger (in parallel on a large one) and names the first bad seq. With `head`, also says whether that head, seen earlier, is the chain hash at some seq of today\'s valid chain (else the ledger was rewritten).',
    tag: 'Audit',
    params: { agent_id: 'A registered agent of the org (its records are counted)' },
    query: z.object({ head: verifyQuery.shape.head.describe('A head seen earlier (64 lowercase hex digits)') }),
    responses: { 200: { description: 'The verification', schema: verifyResult } },
    errors: errors(SCOPED, READ, 400, 404),
  }),

  'GET /audit/checkpoint': audit({
    summary: 'The latest signed checkpoint',
    description: 'A C2SP tlog-checkpoint signed note of the org\'s Merkle tree, covering every record committed more than a second ago. 503 while the tree is rebuilt after a start.',
    tag: 'Transparency log',
    responses: { 200: { description: CHECKPOINT, contentType: 'text/plain; charset=utf-8' } },
    errors: errors(SCOPED, READ),
  }),
  'GET /audit/proof/inclusion': audit({
    summary: 'Inclusion proof of a record',
    description: 'RFC 9162 proof that the record `seq` (leaf index seq − 1) is in the tree of `tree_size` leaves. Out of range: 400. 503 while the tree is rebuilt, or (cluster) while this node trails the latest checkpoint.',
    tag: 'Transparency log',
    query: z.object({
      seq: intParam(1, TREE_SIZE, null, 'The record\'s seq, at most tree_size'),
      tree_size: z.string().regex(/^\d{1,15}$/).optional().describe('The tree\'s size: an integer from 1 to the tree\'s; default the latest checkpoint\'s'),
    }),
    responses: { 200: { description: 'The proof', schema: inclusionProof } },
    errors: errors(SCOPED, READ, 400),
  }),
  'GET /audit/proof/consistency': audit({
    summary: 'Consistency proof between two tree sizes',
    description: 'RFC 9162 proof that the tree of `from` leaves is a prefix of the tree of `to` leaves. Out of range: 400.',
    tag: 'Transparency log',
    query: z.object({ from: intParam(1, TREE_SIZE, null, 'The older size, at most `to`'), to: intParam(1, TREE_SIZE, null, 'The newer size, at most the tree\'s') }),
    responses: { 200: { description: 'The proof', schema: consistencyProof } },
    errors: errors(SCOPED, READ, 400),
  }),

  'GET /exports': audit({
    summary: 'Past export bundles',
    description: 'Read from the ledger\'s `export` records, newest first.',
    tag: 'Exports',
    responses: { 200: { description: 'Every bundle made', schema: z.array(exportEntry) } },
    errors: errors(SCOPED, READ),
  }),
  'POST /exports/bundle': audit({
    summary: 'Make an export bundle',
    description:
      'A bundle of the ledger window (since_seq, until_seq], until_seq the head by default: ledger.jsonl, agent cards, incidents and oversight (limited to `agents` if given), the signed checkpoint at until_seq and the Merkle range before since_seq, and a manifest over them; an `export` ledger record says it was made. At most 50,000 records a bundle: export larger ranges as consecutive windows. Counts towards the plan\'s monthly exports (429 `quota_exceeded`). 503 while the transparency log catches up with the ledger.\n\nAnswered as JSON by default; with `Accept: application/gzip` (named, not ranked below JSON) as a .tar.gz of the same files instead, with the headers below.',
    tag: 'Exports',
    body: exportBundleBody,
    headers: { Accept: { description: '`application/gzip` for a .tar.gz; JSON otherwise' } },
    responses: {
      200: {
        description: 'The bundle (JSON; a .tar.gz, application/gzip, when asked)',
        schema: bundle,
        headers: {
          'Content-Disposition': '.tar.gz only: `attachment; filename="vigil-<org>-<since>-<until>.tar.gz"`',
          'X-Vigil-Manifest-Sha256': '.tar.gz only: the manifest\'s SHA-256',
          'X-Vigil-Export-Seq': '.tar.gz only: the seq of the `export` record',
        },
      },
    },
    errors: errors(SCOPED, BODY, WRITE),
  }),
};
