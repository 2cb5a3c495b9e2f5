import { describe, expect, it } from 'vitest';
import { parseTilePath, tileLeaves, tilePath } from '../../src/domain/tiles.js';

// C2SP tlog-tiles paths: tile/<L>/<N>[.p/<W>], N in groups of three digits, each but the last
// prefixed with x; one canonical spelling per tile (full tiles are cached for a year under it).
describe('C2SP tile paths', () => {
  const cases: [string, { level: number; index: number; width: number | null }][] = [
    ['0/000', { level: 0, index: 0, width: null }],
    ['0/001.p/45', { level: 0, index: 1, width: 45 }],
    ['1/999', { level: 1, index: 999, width: null }],
    ['0/x001/234', { level: 0, index: 1234, width: null }],
    ['2/x001/x000/000.p/255', { level: 2, index: 1_000_000, width: 255 }],
    ['0/x123/x456/789', { level: 0, index: 123_456_789, width: null }],
  ];
  for (const [path, tile] of cases) {
    it(`reads and writes ${path}`, () => {
      expect(parseTilePath(path)).toEqual(tile);
      expect(tilePath(tile)).toBe(path);
    });
  }

  it('refuses every other spelling', () => {
    for (const path of ['0/1', '0/0001', '0/x000/001', '00/000', '0/000.p/0', '0/000.p/256', '0/000.p/045', '0/001/234', '0/x1/234', '0/000/', 'x/000', '0/abc']) {
      expect(parseTilePath(path), path).toBeNull();
    }
  });

  it('knows the leaves a tree holds once it has a tile', () => {
    expect(tileLeaves({ level: 0, index: 0, width: null })).toBe(256);
    expect(tileLeaves({ level: 0, index: 1, width: 45 })).toBe(301);
    // A hash of tree level 8 covers 256 leaves.
    expect(tileLeaves({ level: 1, index: 0, width: 1 })).toBe(256);
    expect(tileLeaves({ level: 1, index: 2, width: null })).toBe(3 * 256 * 256);
  });
});
