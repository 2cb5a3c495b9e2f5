import { describe, expect, it } from 'vitest';
import { VigilError } from '../../src/errors.js';
import { FreeSpaceFloor } from '../../src/store/free-space.js';

describe('the free-space floor', () => {
  const MB = 1024 * 1024;

  it('refuses below the floor with a retryable 503, reading the disk once an event-loop turn', async () => {
    let free = 100 * MB;
    let reads = 0;
    const floor = new FreeSpaceFloor('/data', 64 * MB, () => (reads++, free));
    floor.check();
    floor.check(); // the same turn: the same reading (many orgs' commits started together)
    expect(reads).toBe(1);
    // Filled by another process right after a write: the next turn's write is refused.
    free = 10 * MB;
    await new Promise((resolve) => setImmediate(resolve));
    let refusal: unknown;
    try {
      floor.check();
    } catch (error) {
      refusal = error;
    }
    expect(reads).toBe(2);
    expect(refusal).toBeInstanceOf(VigilError);
    expect((refusal as VigilError).code).toBe('unavailable');
    expect((refusal as VigilError).retryAfterSeconds).toBe(1);
    expect((refusal as VigilError).message).toMatch(/less than 64 MB free \(VIGIL_MIN_FREE_MB\); nothing was recorded, retry/);
    free = 64 * MB;
    await new Promise((resolve) => setImmediate(resolve));
    expect(() => floor.check()).not.toThrow();
  });

  it('never reads the disk with a floor of 0', () => {
    const floor = new FreeSpaceFloor('/data', 0, () => {
      throw new Error('read');
    });
    expect(() => floor.check()).not.toThrow();
  });
});
