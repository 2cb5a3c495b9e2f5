import type { SignedCheckpoint } from '../../actors/log-checkpoints.js';
import { consistencyProof } from '../../domain/merkle.js';
import { verifierKey } from '../../domain/signed-note.js';
import { parseTilePath, tileLeaves } from '../../domain/tiles.js';
import { VigilError } from '../../errors.js';
import type { AppDeps } from '../deps.js';
import { errorResponse } from '../errors.js';
import type { Route, RouteContext, RouteResult } from '../router.js';
import { inclusionBody } from './inclusion-body.js';
import { answered, logRoute } from './log-route.js';
import { PUBLIC_NOT_FOUND, publicRoute, type PublicGate } from './public.js';
import { queryInt } from '../validate.js';

const MAX_SIZE = 1e15;
const hex = (b: Buffer): string => b.toString('hex');

/** A checkpoint's note as JSON bytes, made once per checkpoint. */
const noteJsons = new WeakMap<SignedCheckpoint, Buffer>();
function noteJson(checkpoint: SignedCheckpoint): Buffer {
  let json = noteJsons.get(checkpoint);
  if (json === undefined) noteJsons.set(checkpoint, (json = Buffer.from(JSON.stringify(checkpoint.note))));
  return json;
}

/**
 * The org's transparency log (DESIGN §10), for any key of the org: its latest signed checkpoint,
 * and O(log n) inclusion and consistency proofs read from the stored tree (nothing recomputed
 * from the leaves).
 */
export function transparencyRoutes(deps: AppDeps, gate: PublicGate): Route[] {
  const { trees, checkpoints } = deps.transparency;
  /** The org's latest checkpoint, or 503 while its tree is being rebuilt from the ledger. */
  const rebuilding = (): VigilError => new VigilError('unavailable', 'this org\'s Merkle tree is being rebuilt from the ledger (after a start); ask again in a moment', undefined, { retryAfterSeconds: 1 });
  /** Cluster mode: the checkpoint served is another node's, larger than this node's replica yet. */
  const behind = (): VigilError => new VigilError('unavailable', 'this node\'s copy of the ledger has not reached the latest checkpoint yet; ask again in a moment', undefined, { retryAfterSeconds: 1 });
  const latestOf = (org: string): SignedCheckpoint => {
    const latest = checkpoints.get(org);
    if (latest === null) throw rebuilding();
    return latest;
  };
  return [
    {
      method: 'get',
      path: '/audit/checkpoint',
      audit: true,
      auth: 'key',
      handler: ({ key }) => ({ text: latestOf(key.org).note, contentType: 'text/plain; charset=utf-8' }),
    },
    {
      method: 'get',
      path: '/audit/proof/inclusion',
      audit: true,
      auth: 'key',
      handler: ({ key, query }) => {
        if (!query.has('seq')) throw invalid('seq', 'required: the seq of the record to prove');
        const seq = queryInt(query, 'seq', 0, 1, MAX_SIZE);
        const latest = latestOf(key.org);
        const size = queryInt(query, 'tree_size', latest.size, 1, MAX_SIZE);
        const tree = trees.tree(key.org);
        if (size > tree.size) throw size <= latest.size ? behind() : invalid('tree_size', `the tree holds ${tree.size} records`);
        if (seq > size) throw invalid('seq', `a record of the tree of ${size} (1..${size})`);
        // The checkpoint is null unless the proof leads to the latest signed one. The body's bytes
        // are reused by the next proof: the router sends them before this returns to the loop.
        const checkpoint = size === latest.size ? noteJson(latest) : null;
        return { bytes: trees.reading(key.org, () => inclusionBody(tree, seq, size, checkpoint)), contentType: 'application/json' };
      },
    },
    {
      method: 'get',
      path: '/audit/proof/consistency',
      audit: true,
      auth: 'key',
      handler: ({ key, query }) => consistency(key.org, query),
    },
    // Public, for orgs with a public agent (others 404 exactly as the public list does): the key,
    // the checkpoint, tiles, consistency proofs. No key, the public rate limit. The checkpoint is
    // answered by any node: the largest of its own and the cluster's board (a KV every node
    // watches), checked and signed again here; tiles and proofs read the tree, so the owner's.
    publicRoute('/public/log-key', gate, (_ctx, headers) => ({ text: `${verifierKey(checkpoints.prefixKey)}\n`, contentType: 'text/plain; charset=utf-8', headers })),
    ...['/public/checkpoints/:org', '/public/tiles/:org/checkpoint'].map((path) =>
      // The second is where C2SP tlog-tiles clients look for it: <tile prefix>/checkpoint.
      publicRoute(path, gate, (ctx, headers) =>
        withGateHeaders(headers, () =>
          publicOrg(ctx) ? { text: latestOf(ctx.params.org!).note, contentType: 'text/plain; charset=utf-8', headers: { ...headers, 'cache-control': 'no-cache' } } : notFound(headers),
        ),
      ),
    ),
    // C2SP tlog-tiles: tile/<L>/<N>[.p/<W>], the hashes of tree level 8·L; immutable once served
    // (a partial tile of width W never changes either). Read from the org's tree: the owner's.
    logRoute(
      '/public/tiles/:org/tile/*',
      gate,
      deps.reads,
      hidden,
      (ctx) =>
        answered(deps.log, () => {
          const org = ctx.params.org!;
          if (!publicOrg(ctx)) return notFound({});
          if (trees.catchingUp(org)) throw rebuilding();
          const tile = parseTilePath(ctx.url.slice(ctx.url.indexOf('/tile/') + '/tile/'.length));
          const bytes = tile === null ? undefined : trees.reading(org, () => trees.tree(org).stripeBytes(tile.level * 8, tile.index, tile.width));
          if (bytes === undefined) {
            // A tile inside the checkpoint served (cluster mode: another node's, larger than this
            // node's tree yet) exists: ask again, rather than a 404 a cache would keep.
            if (tile !== null && tileLeaves(tile) <= (checkpoints.get(org)?.size ?? 0)) throw behind();
            return notFound({});
          }
          return { bytes, contentType: 'application/octet-stream', headers: { 'cache-control': 'public, max-age=31536000, immutable' } };
        }),
      deps.log,
      { url: true },
    ),
    logRoute('/public/proof/:org/consistency', gate, deps.reads, hidden, (ctx) => answered(deps.log, () => (publicOrg(ctx) ? consistency(ctx.params.org!, ctx.query) : notFound({}))), deps.log),
  ];

  /** A public answer, its errors (400, 503) too, with the gate's headers (CORS, rate limit): a page on another origin reads them. */
  function withGateHeaders(headers: Record<string, string>, answer: () => RouteResult): RouteResult {
    try {
      return answer();
    } catch (error) {
      const refused = errorResponse(error, deps.log);
      return { status: refused.status, text: refused.body, contentType: 'application/json', headers: { ...headers, 'cache-control': 'no-store', ...refused.headers } };
    }
  }

  function consistency(org: string, query: URLSearchParams): { body: unknown } {
    if (trees.catchingUp(org)) throw rebuilding();
    const tree = trees.tree(org);
    if (!query.has('from') || !query.has('to')) throw invalid(query.has('from') ? 'to' : 'from', 'required: the two tree sizes');
    const from = queryInt(query, 'from', 1, 1, MAX_SIZE);
    const to = queryInt(query, 'to', 1, 1, MAX_SIZE);
    if (to > tree.size) throw to <= (checkpoints.get(org)?.size ?? 0) ? behind() : invalid('to', `the tree holds ${tree.size} records`);
    if (from > to) throw invalid('from', 'must not be above to');
    return { body: { from, to, hashes: trees.reading(org, () => consistencyProof(tree, from, to)).map(hex) } };
  }

  /** The 404 of an org without a public agent, given by the node asked (every node holds the public records). */
  function hidden(ctx: RouteContext): RouteResult | null {
    return publicOrg(ctx) ? null : notFound({});
  }

  function publicOrg(ctx: RouteContext): boolean {
    return deps.publicRecords.listJson(ctx.params.org ?? '', 1, 0) !== undefined;
  }
}

/** As the public list answers an org without a public agent, byte for byte and header for header. */
function notFound(headers: Record<string, string>): RouteResult {
  return { status: 404, text: PUBLIC_NOT_FOUND, contentType: 'application/json', headers: { ...headers, 'cache-control': 'public, max-age=60' } };
}

function invalid(path: string, message: string): VigilError {
  return new VigilError('validation_failed', `invalid query: ${path}`, [{ path, message }]);
}
