import { afterEach, describe, expect, it } from 'vitest';
import { WriterShare } from '../../src/actors/writer-share.js';
import { embedded } from '../support/embedded.js';
import { removeDir, tempDir } from '../support/server.js';
import { withAppend } from '../support/with-append.js';

/**
 * WriterShare tells a writer whether another org's writer has work; beside one, it keeps to
 * quarter batches. A writer that cannot append (its recovery failing or not finished, commands
 * waiting in it) has no work to share the disk with: it must not hold every other writer to
 * quarter batches for as long as it stays broken.
 */
const MAX_BATCH = 16;

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

const ingest = (org: string, n: number) => ({
  type: 'event.ingest' as const,
  org,
  event: { agent_id: 'x', event_type: 'output_generated' as const, payload: { n }, dti: null, source: 'self' as const, actor: null },
});
const register = (org: string) => ({ type: 'agent.register' as const, org, agent: { agent_id: 'x', name: 'X', kind: 'production' as const, observed: true } });

describe('WriterShare with a broken writer', () => {
  it('a writer whose appends fail, its recovery hanging then failing, commands waiting in it, does not make another org send quarter batches', async () => {
    const dir = tempDir('vigil-share-');
    const sizes: number[] = [];
    let brokenReads = 0;
    let unblock = (): void => {};
    const blocked = new Promise<void>((resolve) => (unblock = resolve));
    // Org "broken": its writer starts (one read), every append fails, and its recovery's read waits until the end.
    const path = embedded(dir, { maxPending: 10_000, maxBatch: MAX_BATCH, share: new WriterShare() }, (log) => {
      const wrapped = withAppend(log, (org, rows, expected) => {
        if (org === 'broken') return Promise.reject(new Error('EIO: disk on fire'));
        sizes.push(rows.length);
        return log.append(org, rows, expected);
      });
      return {
        ...wrapped,
        async *read(org, from) {
          if (org === 'broken' && ++brokenReads > 1) {
            await blocked;
            throw new Error('EIO: the ledger cannot be read');
          }
          yield* log.read(org, from);
        },
      };
    });
    cleanups.push(async () => {
      unblock();
      await path.close();
      removeDir(dir);
    });
    expect((await path.commands.request(register('a'))).ok).toBe(true);
    expect(await path.commands.request(register('broken'))).toMatchObject({ ok: false, code: 'unavailable' });
    expect(brokenReads).toBe(2); // its recovery is under way, and does not finish
    const waiting = Array.from({ length: 5 }, (_, n) => path.commands.request(ingest('broken', n)));
    await new Promise((resolve) => setImmediate(resolve));
    expect([...path.actors.depths()]).toContainEqual(['broken', 5]);

    // Alone, full batches; beside a busy writer they would be quarter ones (4 × 16 in batches of 4).
    expect(await floodSizes()).toEqual([MAX_BATCH, MAX_BATCH, MAX_BATCH, MAX_BATCH]);

    // Its recovery fails now, and is retried every second; commands wait in it meanwhile.
    unblock();
    expect((await Promise.all(waiting)).every((r) => !r.ok && r.code === 'unavailable')).toBe(true);
    const more = Array.from({ length: 5 }, (_, n) => path.commands.request(ingest('broken', n)));
    await new Promise((resolve) => setImmediate(resolve));
    expect([...path.actors.depths()]).toContainEqual(['broken', 5]);
    expect(await floodSizes()).toEqual([MAX_BATCH, MAX_BATCH, MAX_BATCH, MAX_BATCH]);
    expect((await Promise.all(more)).every((r) => !r.ok && r.code === 'unavailable')).toBe(true);

    /** The sizes of the appends of a backlog of 4 × maxBatch commands of org "a", sent in one turn. */
    async function floodSizes(): Promise<number[]> {
      sizes.length = 0;
      const replies = await Promise.all(Array.from({ length: 4 * MAX_BATCH }, (_, n) => path.commands.request(ingest('a', n))));
      expect(replies.every((r) => r.ok)).toBe(true);
      return [...sizes];
    }
  });
});
