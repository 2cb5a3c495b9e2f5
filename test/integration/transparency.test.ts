import { createPrivateKey, generateKeyPairSync } from 'node:crypto';
import { existsSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { leafHash, MemoryTree, rootAt } from '../../src/domain/merkle.js';
import { verifyConsistency, verifyInclusion } from '../../src/domain/merkle-verify.js';
import { noteKey, openNote, parseCheckpoint, parseVerifierKey, rawPublicKey, type Checkpoint } from '../../src/domain/signed-note.js';
import { LOG_KEY_FILE, LOG_ORIGIN_FILE } from '../../src/services/log-key.js';
import { MERKLE_DIR } from '../../src/store/lmdb-merkle-store.js';
import { exportLeafInput, rfcInclusion, rfcLeafHash, rfcRoot } from '../support/rfc9162.js';
import { call, parseLines, removeDir, startServer, tempDir, type TestServer } from '../support/server.js';

// DESIGN §10 over real HTTP, embedded mode: the org's signed checkpoint, inclusion and consistency
// proofs, checked here from the export alone, with the key in the data dir; across a restart.

const hex = (h: string): Buffer => Buffer.from(h, 'hex');

/** The tree an auditor builds from the export, knowing nothing of the service's. */
async function treeFromExport(url: string): Promise<MemoryTree> {
  const tree = new MemoryTree();
  for (const r of parseLines((await call(url, 'GET', '/audit/export')).text)) {
    tree.append(leafHash(exportLeafInput(r)));
  }
  return tree;
}

/** The latest checkpoint once it covers `size` records (signed within a second or so), opened with the key. */
async function checkpointOf(server: TestServer, size: number, keyFile = join(server.dataDir, LOG_KEY_FILE)): Promise<Checkpoint> {
  // The log's name: the host of its first start, kept in the data dir (log-origin).
  const host = readFileSync(join(server.dataDir, LOG_ORIGIN_FILE), 'utf8').trim();
  const key = noteKey(`${host}/vigil/acme`, rawPublicKey(createPrivateKey(readFileSync(keyFile, 'utf8'))));
  let note = '';
  await expect
    .poll(
      async () => {
        const res = await call(server.url, 'GET', '/audit/checkpoint');
        expect(res.headers.get('content-type')).toBe('text/plain; charset=utf-8');
        note = res.text;
        return parseCheckpoint(openNote(note, key) ?? '')?.size;
      },
      { timeout: 5000, interval: 100 },
    )
    .toBe(size);
  return parseCheckpoint(openNote(note, key)!)!;
}

async function ingest(url: string, n: number): Promise<void> {
  for (let i = 0; i < n; i += 50) {
    const events = Array.from({ length: Math.min(50, n - i) }, (_, j) => ({ agent_id: 'a', event_type: 'config_read', payload: { i: i + j } }));
    expect((await call(url, 'POST', '/events/batch', { body: { events } })).status).toBe(200);
  }
}

describe('transparency log over HTTP (embedded)', () => {
  const dir = tempDir();
  let server: TestServer;

  beforeAll(async () => {
    server = await startServer({}, dir);
    await call(server.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } });
    await ingest(server.url, 299); // 300 records: one full stripe of 256 and part of the next
  });
  afterAll(async () => {
    await server.close();
    removeDir(dir);
  });

  it('signs a checkpoint whose root is the one an auditor computes from the export', async () => {
    const checkpoint = await checkpointOf(server, 300);
    expect(checkpoint.origin).toBe(`127.0.0.1:${new URL(server.url).port}/vigil/acme`);
    expect(checkpoint.root.equals(rootAt(await treeFromExport(server.url)))).toBe(true);
  });

  it('proves any record\'s inclusion in the checkpoint, with the leaf hash of its exported bytes', async () => {
    const checkpoint = await checkpointOf(server, 300);
    const exported = await treeFromExport(server.url);
    for (const seq of [1, 2, 128, 256, 257, 299, 300]) {
      const res = await call(server.url, 'GET', `/audit/proof/inclusion?seq=${seq}`);
      expect(res.status).toBe(200);
      const { leaf_index, tree_size, leaf_hash, hashes, checkpoint: note } = res.body;
      expect([leaf_index, tree_size]).toEqual([seq - 1, 300]);
      expect(leaf_hash).toBe(exported.node(0, seq - 1).toString('hex'));
      expect(typeof note).toBe('string');
      expect(verifyInclusion(seq - 1, 300, hex(leaf_hash), hashes.map(hex), checkpoint.root), `seq ${seq}`).toBe(true);
    }
    // Against an earlier size, from the auditor's own root of it.
    const res = await call(server.url, 'GET', '/audit/proof/inclusion?seq=10&tree_size=100');
    expect(res.body.checkpoint).toBeNull();
    expect(verifyInclusion(9, 100, hex(res.body.leaf_hash), res.body.hashes.map(hex), rootAt(exported, 100))).toBe(true);
  });

  it('proves the log at any earlier size a prefix of the latest', async () => {
    const checkpoint = await checkpointOf(server, 300);
    const exported = await treeFromExport(server.url);
    for (const from of [1, 100, 256, 257, 300]) {
      const res = await call(server.url, 'GET', `/audit/proof/consistency?from=${from}&to=300`);
      expect(res.status).toBe(200);
      expect(res.body).toMatchObject({ from, to: 300 });
      expect(verifyConsistency(from, 300, rootAt(exported, from), checkpoint.root, res.body.hashes.map(hex)), `from ${from}`).toBe(true);
    }
  });

  it('refuses queries outside the tree with 400 naming the parameter', async () => {
    for (const [path, param] of [
      ['/audit/proof/inclusion', 'seq'],
      ['/audit/proof/inclusion?seq=0', 'seq'],
      ['/audit/proof/inclusion?seq=abc', 'seq'],
      ['/audit/proof/inclusion?seq=301&tree_size=300', 'seq'],
      ['/audit/proof/inclusion?seq=1&tree_size=301', 'tree_size'],
      ['/audit/proof/consistency?to=5', 'from'],
      ['/audit/proof/consistency?from=5', 'to'],
      ['/audit/proof/consistency?from=6&to=5', 'from'],
      ['/audit/proof/consistency?from=1&to=301', 'to'],
    ] as const) {
      const res = await call(server.url, 'GET', path);
      expect(res.status, path).toBe(400);
      expect(res.body.error.details[0].path, path).toBe(param);
    }
    expect((await call(server.url, 'GET', '/audit/checkpoint', { key: null })).status).toBe(401);
  });

  it('publishes one verifier key that checks every org\'s checkpoints, and the checkpoints and consistency proofs of orgs with a public agent', async () => {
    const port = new URL(server.url).port;
    const [checkpointPath, proofPath] = ['/public/checkpoints/acme', '/public/proof/acme/consistency?from=100&to=300'];
    // No public agent yet: 404 exactly as the public list answers; a key sent to a public route: 400.
    for (const path of [checkpointPath, proofPath, '/public/checkpoints/nobody']) {
      const res = await call(server.url, 'GET', path, { key: null });
      expect(res.status, path).toBe(404);
      expect(res.text).toBe((await call(server.url, 'GET', '/public/agents/acme', { key: null })).text);
    }
    expect((await call(server.url, 'GET', '/public/log-key')).status).toBe(400);
    expect((await call(server.url, 'PATCH', '/admin/agents/a', { body: { public: true } })).status).toBe(200);

    const published = await call(server.url, 'GET', '/public/log-key', { key: null });
    expect(published.headers.get('content-type')).toBe('text/plain; charset=utf-8');
    const vkey = parseVerifierKey(published.text)!;
    expect(vkey.name).toBe(`127.0.0.1:${port}/vigil`);
    const own = await checkpointOf(server, 301); // the PATCH is record 301
    const note = await call(server.url, 'GET', checkpointPath, { key: null });
    expect(note.status).toBe(200);
    const opened = parseCheckpoint(openNote(note.text, vkey) ?? '');
    expect(opened?.root.equals(own.root), 'the published key checks the org\'s checkpoint').toBe(true);
    const proof = await call(server.url, 'GET', proofPath.replace('to=300', 'to=301'), { key: null });
    expect(proof.status).toBe(200);
    expect(verifyConsistency(100, 301, rootAt(await treeFromExport(server.url), 100), own.root, proof.body.hashes.map(hex))).toBe(true);
    expect((await call(server.url, 'GET', '/public/proof/acme/consistency?from=2&to=999', { key: null })).status).toBe(400);
  });

  it('serves C2SP tiles of public orgs: full ones immutable, partial ones of any width it holds, each the hashes an auditor computes', async () => {
    const exported = await treeFromExport(server.url); // 301 records: level 0 has one full tile and 45 hashes of the next
    const get = (tile: string) => fetch(`${server.url}/public/tiles/acme/tile/${tile}`);
    const expected = (level: number, from: number, count: number): Buffer => Buffer.concat(Array.from({ length: count }, (_, i) => exported.node(level, from + i)));
    const full = await get('0/000');
    expect(full.status).toBe(200);
    expect(full.headers.get('content-type')).toBe('application/octet-stream');
    expect(full.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(Buffer.from(await full.arrayBuffer()).equals(expected(0, 0, 256))).toBe(true);
    const partial = await get('0/001.p/45');
    expect(Buffer.from(await partial.arrayBuffer()).equals(expected(0, 256, 45))).toBe(true);
    const earlier = await get('0/001.p/10');
    expect(Buffer.from(await earlier.arrayBuffer()).equals(expected(0, 256, 10))).toBe(true);
    // Level 1 holds the hashes of tree level 8: one node (of leaves 0..255), a partial tile of width 1.
    expect(Buffer.from(await (await get('1/000.p/1')).arrayBuffer()).equals(expected(8, 0, 1))).toBe(true);
    // Only the canonical spelling of a tile (it is cached for a year under one URL).
    for (const missing of ['0/001.p/46', '0/002', '1/000', 'entries/000', '0/1', '0/000.p/0', '0/000.p/256', '0/x000', '00/000', '0/x000/000', '0/001.p/045']) {
      expect((await get(missing)).status, missing).toBe(404);
    }
    expect((await fetch(`${server.url}/public/tiles/nobody/tile/0/000`)).status).toBe(404);
    // The checkpoint where tile clients look for it, <prefix>/checkpoint: the org's latest.
    const latest = await fetch(`${server.url}/public/tiles/acme/checkpoint`);
    expect(latest.status).toBe(200);
    expect(await latest.text()).toBe((await call(server.url, 'GET', '/public/checkpoints/acme', { key: null })).text);
    expect((await fetch(`${server.url}/public/tiles/nobody/checkpoint`)).status).toBe(404);
  });

  it('keeps its key, its name and its tree across a restart on another port: the new checkpoint is consistent with the old', async () => {
    const before = await checkpointOf(server, 301);
    const port = new URL(server.url).port;
    await server.close();
    server = await startServer({}, dir);
    expect(new URL(server.url).port).not.toBe(port);
    await ingest(server.url, 40);
    const after = await checkpointOf(server, 341);
    expect(after.origin).toBe(before.origin);
    expect(after.origin).toBe(`127.0.0.1:${port}/vigil/acme`); // the first start's, not the new port's
    expect((await call(server.url, 'GET', '/public/log-key', { key: null })).text.startsWith(`127.0.0.1:${port}/vigil+`)).toBe(true);
    const res = await call(server.url, 'GET', '/audit/proof/consistency?from=301&to=341');
    expect(verifyConsistency(301, 341, before.root, after.root, res.body.hashes.map(hex))).toBe(true);
    expect(after.root.equals(rootAt(await treeFromExport(server.url)))).toBe(true);
  });
});

describe('every inclusion proof of a 1,000-record ledger, as served (an independent RFC 9162 verifier)', () => {
  const dir = tempDir();
  let server: TestServer;
  beforeAll(async () => {
    server = await startServer({}, dir);
    await call(server.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } });
    await ingest(server.url, 999);
  });
  afterAll(async () => {
    await server.close();
    removeDir(dir);
  });

  it('verifies each record\'s proof against the signed root, the root computed from the export by RFC 9162 §2.1.1; each proof changed is rejected', async () => {
    const checkpoint = await checkpointOf(server, 1000);
    // The leaf inputs as an auditor makes them from the export (the bytes content_hash covers), with
    // the tests' own JCS, each checked against its line's content_hash.
    const inputs = parseLines((await call(server.url, 'GET', '/audit/export')).text).map((r) => exportLeafInput(r));
    expect(inputs).toHaveLength(1000);
    expect(rfcRoot(inputs).equals(checkpoint.root), 'the signed root is the export\'s').toBe(true);
    let [changed, rejected] = [0, 0];
    for (let seq = 1; seq <= 1000; seq++) {
      const res = await call(server.url, 'GET', `/audit/proof/inclusion?seq=${seq}`);
      expect(res.status).toBe(200);
      const leaf = rfcLeafHash(inputs[seq - 1]!);
      expect(res.body.leaf_hash, `seq ${seq}`).toBe(leaf.toString('hex'));
      const path = (res.body.hashes as string[]).map(hex);
      expect(rfcInclusion(seq - 1, 1000, leaf, path, checkpoint.root), `seq ${seq}`).toBe(true);
      // Each hash changed in turn, one dropped, one added, and another leaf: all rejected.
      for (let i = 0; i < path.length; i++) {
        const bad = path.map((h) => Buffer.from(h));
        bad[i]!.writeUInt8(bad[i]![i % 32]! ^ 0x01, i % 32);
        changed++;
        if (!rfcInclusion(seq - 1, 1000, leaf, bad, checkpoint.root)) rejected++;
      }
      expect(rfcInclusion(seq - 1, 1000, leaf, path.slice(1), checkpoint.root)).toBe(false);
      expect(rfcInclusion(seq - 1, 1000, leaf, [...path, leaf], checkpoint.root)).toBe(false);
      expect(rfcInclusion(seq - 1, 1000, rfcLeafHash(inputs[seq % 1000]!), path, checkpoint.root)).toBe(false);
      expect(rfcInclusion(seq % 1000, 1000, leaf, path, checkpoint.root)).toBe(false);
    }
    expect(changed).toBeGreaterThan(9_000); // about ten hashes a proof
    expect(rejected).toBe(changed);
  });

  it('serves the same root and proofs after a restart whose trees\' environment is found torn (a machine restart) or deleted: rebuilt from the ledger', async () => {
    const before = await checkpointOf(server, 1000);
    const merkleDir = join(server.dataDir, MERKLE_DIR);
    for (const damage of [
      () => writeFileSync(join(merkleDir, 'state.json'), JSON.stringify({ boot: 'another boot', open: true })),
      () => rmSync(merkleDir, { recursive: true }),
    ]) {
      await server.close();
      expect(existsSync(join(merkleDir, 'data.mdb'))).toBe(true); // 3 stripes of 256 leaves were stored
      damage();
      server = await startServer({}, dir);
      const after = await checkpointOf(server, 1000);
      expect(after.root.equals(before.root)).toBe(true);
      for (const seq of [1, 500, 768, 1000]) {
        const res = await call(server.url, 'GET', `/audit/proof/inclusion?seq=${seq}`);
        expect(rfcInclusion(seq - 1, 1000, hex(res.body.leaf_hash), res.body.hashes.map(hex), before.root), `seq ${seq}`).toBe(true);
      }
    }
  });
});

describe('the log key', () => {
  it('is the one VIGIL_LOG_KEY names, and a start with a key that is not Ed25519 fails naming the file', async () => {
    const dir = tempDir();
    const file = join(dir, 'given.pem');
    writeFileSync(file, generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }));
    const server = await startServer({ VIGIL_LOG_KEY: file }, join(dir, 'data'));
    try {
      await call(server.url, 'POST', '/agents/', { body: { agent_id: 'a', name: 'A' } });
      expect((await checkpointOf(server, 1, file)).size).toBe(1);
    } finally {
      await server.close();
    }
    const rsa = join(dir, 'rsa.pem');
    writeFileSync(rsa, generateKeyPairSync('rsa', { modulusLength: 1024 }).privateKey.export({ format: 'pem', type: 'pkcs8' }));
    await expect(startServer({ VIGIL_LOG_KEY: rsa }, join(dir, 'data2'))).rejects.toThrow(/rsa\.pem is an rsa key, not Ed25519/);
    removeDir(dir);
  });
});
