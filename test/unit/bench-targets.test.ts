import { describe, expect, it } from 'vitest';
import { chainBatchTarget, chainTarget, jsonTarget, lmdbTarget, msgpackTarget, scoringTarget } from '../../bench/micro.js';

describe('micro benchmark targets compute the right result', () => {
  for (const make of [chainTarget, () => chainBatchTarget(), scoringTarget, msgpackTarget, jsonTarget]) {
    it(make().name, async () => {
      expect(await make().check()).toBe(true);
    });
  }
  it('LMDB append', async () => {
    const target = lmdbTarget(2, 8);
    try {
      expect(await target.check()).toBe(true);
      expect(await target.run()).toEqual({ ok: true });
      expect(await target.run()).toEqual({ ok: true });
    } finally {
      await target.teardown?.();
    }
  });
});
