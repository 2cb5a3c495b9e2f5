import { buildOrgBundle } from '../../bundle/build.js';
import { writeTarGzAsync } from '../../bundle/tar.js';
import { blockingLimit, monthOf, nextMonthStart } from '../../domain/billing.js';
import type { MerkleFile } from '../../domain/bundle-log.js';
import { compactRange } from '../../domain/merkle.js';
import { exportBundleBody } from '../../domain/schemas.js';
import { DEFAULT_DEADLINE_MS } from '../../bus/command-router.js';
import { VigilError } from '../../errors.js';
import { prefersGzip } from '../accept.js';
import { unwrap, type AppDeps } from '../deps.js';
import type { Route } from '../router.js';
import { collection } from './collection.js';
import { validate } from '../validate.js';

/**
 * A bundle is built in memory on the event loop (≈ 0.1 s and 25 MB for 50,000 records): windows are
 * capped so one export cannot stall ingest; larger ranges are exported as consecutive windows.
 */
export const MAX_BUNDLE_RECORDS = 50_000;

/** Export bundles of the caller's org (any key) and the list of past ones. */
export function exportRoutes(deps: AppDeps): Route[] {
  return [
    ...collection({ method: 'get', path: '/exports', auth: 'key', audit: true, handler: ({ key }) => ({ body: deps.exportLog.list(key.org, Number.MAX_SAFE_INTEGER) }) }),
    {
      method: 'post',
      path: '/exports/bundle',
      audit: true,
      auth: 'key',
      handler: async ({ key, body, headers }) => {
        const valid = validate(exportBundleBody, body);
        const org = key.org;
        // The command's deadline runs from now, not from after the reads below (cluster mode's answer bound).
        const deadline = deps.now() + DEFAULT_DEADLINE_MS;
        // A bundle is a read of this node's ledger: in cluster mode it first waits, as keyed GETs
        // do, until this node's replica holds the org's last batch (read-your-writes on any node),
        // then until its directory has taken those rows (it names the bundle's agents), as the
        // tree must (logFiles).
        await deps.caughtUp?.(org);
        await deps.settled?.(org);
        const length = deps.directory.org(org)?.length ?? 0;
        const req = { ...valid, until_seq: valid.until_seq ?? length };
        if (req.until_seq > length) {
          throw new VigilError('validation_failed', 'invalid body: until_seq', [{ path: 'until_seq', message: `beyond the ledger, whose last seq is ${length}` }]);
        }
        if (valid.until_seq === undefined && req.since_seq >= length) {
          throw new VigilError('validation_failed', 'invalid body: since_seq', [{ path: 'since_seq', message: `must be below until_seq, which defaults to the ledger's last seq, ${length}` }]);
        }
        if (req.until_seq - req.since_seq > MAX_BUNDLE_RECORDS) {
          throw new VigilError('validation_failed', 'invalid body: window', [{ path: 'until_seq', message: `a bundle holds at most ${MAX_BUNDLE_RECORDS} records; split the window` }]);
        }
        const unknown = (req.agents ?? []).map((id, i) => ({ id, i })).filter(({ id }) => deps.directory.get(org, id) === undefined);
        if (unknown.length > 0) {
          throw new VigilError('validation_failed', 'invalid body: agents', unknown.map(({ id, i }) => ({ path: `agents.${i}`, message: `agent ${id} not found` })));
        }
        const now = deps.now();
        refuseOverQuota(deps, org, now);
        const log = await logFiles(deps, org, req.since_seq, req.until_seq);
        const bundle = buildOrgBundle(deps.ledger, deps.directory, { org, since_seq: req.since_seq, until_seq: req.until_seq, agents: req.agents, log }, new Date(now).toISOString());
        const recorded = unwrap(
          await deps.commands.request({
            type: 'export.record',
            org,
            export: { manifest_sha256: bundle.manifestSha256, since_seq: req.since_seq, until_seq: req.until_seq, files: bundle.files.map((f) => f.name), agents: req.agents },
          }, { deadline }),
        );
        if (prefersGzip(headers.accept)) {
          return {
            bytes: await writeTarGzAsync(bundle.files, Math.floor(now / 1000)),
            contentType: 'application/gzip',
            headers: {
              'content-disposition': `attachment; filename="vigil-${org}-${req.since_seq}-${req.until_seq}.tar.gz"`,
              'x-vigil-manifest-sha256': bundle.manifestSha256,
              'x-vigil-export-seq': String(recorded.seq),
            },
          };
        }
        return { body: { export: recorded, manifest: bundle.manifest, files: Object.fromEntries(bundle.files.map((f) => [f.name, f.content.toString('utf8')])) } };
      },
    },
  ];
}

/** How long a bundle waits for the org's tree to take the window's last rows (it follows the ledger by a turn or so). */
const TREE_WAIT_MS = 2000;

/**
 * The bundle's log files: the checkpoint of the org's tree at until_seq, signed now, and the compact
 * range before since_seq. The tree follows the ledger; one behind the window (catching up after a
 * start, or not fed the org live: it then catches up from the rows here) is waited for briefly, then 503.
 */
async function logFiles(deps: AppDeps, org: string, since: number, until: number): Promise<{ checkpoint: string; merkle: MerkleFile }> {
  const { trees, checkpoints } = deps.transparency;
  const deadline = performance.now() + TREE_WAIT_MS;
  while (!trees.holds(org, until)) {
    if (performance.now() > deadline) throw new VigilError('unavailable', `the transparency log of ${org} is catching up with its ledger; ask again shortly`, undefined, { retryAfterSeconds: 1 });
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  return trees.reading(org, () => {
    const range = compactRange(trees.tree(org), since).map(({ level, index, hash }) => ({ level, index, hash: hash.toString('hex') }));
    return { checkpoint: checkpoints.signAt(org, until).note, merkle: { since_seq: since, tree_size: until, range } };
  });
}

/**
 * A cheap early refusal, so an org past its monthly export quota cannot make the server build a
 * bundle first. The meter may trail the writer by a batch; the writer's check stays the one that
 * holds under concurrent requests.
 */
function refuseOverQuota(deps: AppDeps, org: string, now: number): void {
  const plan = deps.registry.planOf(org);
  const limit = blockingLimit(plan, 'exports_per_month');
  if (limit === null || deps.meter.usage(org, monthOf(now)).exports < limit) return;
  throw new VigilError(
    'quota_exceeded',
    `the ${plan.name} plan allows ${limit} export bundles a month and this month's are used; upgrade the plan or wait for the next month (UTC)`,
    undefined,
    { retryAfterSeconds: Math.ceil((nextMonthStart(now) - now) / 1000) },
  );
}
