import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { openLmdb } from '../../src/store/lmdb.js';
import { FreeSpaceFloor } from '../../src/store/free-space.js';
import { bootId } from '../../src/store/boot-marker.js';
import { dropLedgerEnvStripes, LmdbMerkleStore, MERKLE_DIR, openMerkleStore } from '../../src/store/lmdb-merkle-store.js';
import { captureLogger, silentLogger, type LogLine } from '../support/logs.js';
import { tempDir } from '../support/server.js';

/**
 * The trees' own LMDB environment (`<data dir>/merkle`, not synced): what it keeps across a clean
 * close and a process crash, and what it deletes because a machine crash may have torn it.
 */
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function dataDir(): string {
  const dir = tempDir('vigil-merkle-env-');
  dirs.push(dir);
  return dir;
}

const stripe = (index: number) => ({ org: 'acme', stripe: { level: 0, index, bytes: Buffer.alloc(8192, index + 1) } });
const statePath = (dir: string): string => join(dir, MERKLE_DIR, 'state.json');
const state = (dir: string): unknown => {
  const text = readFileSync(statePath(dir), 'utf8');
  expect(text).toHaveLength(128); // written in place, padded: no new disk space once it exists
  return JSON.parse(text);
};

/** A data dir whose trees' environment holds two stripes, closed cleanly. */
async function withStripes(): Promise<string> {
  const dir = dataDir();
  const store = openMerkleStore(dir, silentLogger(), { boot: 'boot-a' });
  await store.put([stripe(0), stripe(1)]);
  await store.close();
  return dir;
}

async function reopened(dir: string, boot: string | null, lines: LogLine[] = []): Promise<{ store: LmdbMerkleStore; stored: number }> {
  const store = openMerkleStore(dir, captureLogger(lines), { boot });
  return { store, stored: store.storedStripes('acme') };
}

describe('the Merkle trees\' LMDB environment', () => {
  it('lives beside the ledger\'s, in the data dir, and says in its state file whether it is open and since which boot', async () => {
    const dir = dataDir();
    const store = openMerkleStore(dir, silentLogger());
    expect(existsSync(join(dir, MERKLE_DIR, 'data.mdb'))).toBe(true);
    expect(state(dir)).toEqual({ boot: bootId(), open: true });
    await store.put([stripe(0)]);
    expect(store.stripe('acme', 0, 0)?.equals(stripe(0).stripe.bytes)).toBe(true);
    await store.close();
    expect(state(dir)).toEqual({ boot: bootId(), open: false });
    await store.close(); // twice: nothing more
  });

  it('keeps its stripes after a clean close, whatever the boot, and after a process crash in the same boot', async () => {
    const dir = await withStripes();
    let { store, stored } = await reopened(dir, 'boot-b');
    expect(stored).toBe(2);
    await store.close();
    // What kill -9 leaves: open, in this boot. Its writes are in the kernel's page cache.
    writeFileSync(statePath(dir), JSON.stringify({ boot: 'boot-b', open: true }));
    ({ store, stored } = await reopened(dir, 'boot-b'));
    expect(stored).toBe(2);
    expect(store.stripe('acme', 0, 1)?.equals(stripe(1).stripe.bytes)).toBe(true);
    await store.close();
  });

  const torn: [string, (dir: string) => void, string | null, RegExp][] = [
    ['open when the machine restarted', (dir) => writeFileSync(statePath(dir), JSON.stringify({ boot: 'boot-a', open: true })), 'boot-b', /not closed cleanly before the machine restarted/],
    ['open where the kernel has no boot id to tell', (dir) => writeFileSync(statePath(dir), JSON.stringify({ boot: null, open: true })), null, /not closed cleanly/],
    ['without its state file', (dir) => rmSync(statePath(dir)), 'boot-a', /no readable state file/],
    ['with a state file it cannot read', (dir) => writeFileSync(statePath(dir), '{"open":'), 'boot-a', /no readable state file/],
    // (A torn data file is not opened at all: lmdb-js can crash the process on one; the state file tells.)
    [
      'with a data file LMDB refuses to open',
      (dir) => {
        rmSync(join(dir, MERKLE_DIR, 'data.mdb'));
        mkdirSync(join(dir, MERKLE_DIR, 'data.mdb'));
      },
      'boot-a',
      /could not be opened/,
    ],
  ];
  for (const [when, damage, boot, why] of torn) {
    it(`deletes its stripes and starts empty when found ${when} (the trees rebuild from the ledger)`, async () => {
      const dir = await withStripes();
      damage(dir);
      const lines: LogLine[] = [];
      const { store, stored } = await reopened(dir, boot, lines);
      expect(stored).toBe(0);
      const warning = lines.find((line) => line.msg.includes('stored stripes may be damaged'));
      expect(String(warning?.fields?.['why'])).toMatch(why);
      expect(state(dir)).toEqual({ boot, open: true });
      await store.put([stripe(0)]);
      expect(store.storedStripes('acme')).toBe(1);
      await store.close();
    });
  }

  it('on a disk below the free-space floor: stores nothing and reads nothing until it can open, then opens with the next write', async () => {
    const dir = dataDir();
    let free = 0;
    const lines: LogLine[] = [];
    const store = new LmdbMerkleStore(join(dir, MERKLE_DIR), captureLogger(lines), 'boot-a', new FreeSpaceFloor(dir, 1024 * 1024, () => free));
    expect(lines.map((line) => line.msg).join()).toMatch(/cannot be opened yet/);
    expect(existsSync(join(dir, MERKLE_DIR))).toBe(false);
    expect([store.storedStripes('acme'), store.stripe('acme', 0, 0), store.hash('acme', 0, 0, 0)]).toEqual([0, undefined, undefined]);
    await expect(store.put([stripe(0)])).rejects.toMatchObject({ code: 'unavailable', retryAfterSeconds: 1 });
    free = 1024 ** 3;
    await new Promise((resolve) => setImmediate(resolve)); // the floor reads the disk once a turn
    await store.put([stripe(0)]);
    expect(store.storedStripes('acme')).toBe(1);
    expect(state(dir)).toEqual({ boot: 'boot-a', open: true });
    await store.close();
    expect(state(dir)).toEqual({ boot: 'boot-a', open: false });
  });

  it('drops the stripes a data dir from before kept in the ledger\'s environment', async () => {
    const dir = dataDir();
    const stores = openLmdb(dir);
    await stores.env.table<[string, number, number], Buffer>('merkle').put(['acme', 0, 0], Buffer.alloc(8192));
    expect(stores.env.hasTable('merkle')).toBe(true);
    expect(await dropLedgerEnvStripes(stores.env)).toBe(true);
    expect(stores.env.hasTable('merkle')).toBe(false);
    expect(await dropLedgerEnvStripes(stores.env)).toBe(false);
    await stores.close();
  });
});
