import { describe, expect, it } from 'vitest';
import { RepeatedFailure } from '../../src/repeated-failure.js';

describe('RepeatedFailure', () => {
  it('logs the first failure, each new reason (numbers aside), and every 30th of the same', () => {
    const failed = new RepeatedFailure();
    const logged = (message: string): boolean => failed.note(message);
    expect(logged('timeout')).toBe(true);
    expect(logged('timeout')).toBe(false);
    expect(logged('the stream holds rows through 12, read through 10')).toBe(true);
    expect(logged('the stream holds rows through 13, read through 11')).toBe(false);
    expect(logged('timeout')).toBe(true);
    const quiet = Array.from({ length: 25 }, () => logged('timeout'));
    expect(quiet.every((l) => !l)).toBe(true);
    expect(failed.failures).toBe(30);
    expect(logged('timeout')).toBe(true); // the 31st: every 30th
    expect(failed.clear()).toBe(31);
    expect(logged('timeout')).toBe(true); // a new streak starts with a line
  });
});

describe('RepeatedFailure with a least time apart', () => {
  it('logs a repeat only once that long has passed since the last line, and a new reason at once', () => {
    let now = 0;
    const failed = new RepeatedFailure(2, 1000, () => now);
    expect(failed.note('timeout')).toBe(true);
    const soon = [failed.note('timeout'), failed.note('timeout'), failed.note('timeout')];
    expect(soon).toEqual([false, false, false]); // the 3rd is an every-2nd, but too soon
    now = 1000;
    expect(failed.note('timeout')).toBe(true);
    expect(failed.note('no responders')).toBe(true);
  });
});
