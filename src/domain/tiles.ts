/**
 * C2SP tlog-tiles (https://c2sp.org/tlog-tiles) addressing: a tile is the 256 hashes (or the first
 * W, for a partial tile) of level L of the tree at index N, as `GET /public/tiles/{org}/…` serves
 * them. These functions know only the paths and the sizes they imply, not where hashes are kept.
 */

/** A tile: level, index, and width (null: a full tile of 256). */
export interface Tile {
  level: number;
  index: number;
  width: number | null;
}

/**
 * A C2SP tile path (`<L>/<N>[.p/<W>]`, N in three-digit groups, all but the last with an `x`); null
 * if it is not one in its one canonical spelling (a tile cached for a year has one URL).
 */
export function parseTilePath(path: string): Tile | null {
  const match = /^(\d{1,2})\/((?:x\d{3}\/)*\d{3})(?:\.p\/(\d{1,3}))?$/.exec(path);
  if (match === null) return null;
  const index = Number(match[2]!.replace(/x|\//g, ''));
  const width = match[3] === undefined ? null : Number(match[3]);
  if (!Number.isSafeInteger(index) || (width !== null && (width < 1 || width > 255))) return null;
  const tile = { level: Number(match[1]), index, width };
  return tilePath(tile) === path ? tile : null;
}

/** The leaves a tree must hold for it to have the tile (its last hash complete). */
export function tileLeaves(tile: Tile): number {
  return (tile.index * 256 + (tile.width ?? 256)) * 256 ** tile.level;
}

/** The canonical path of a tile: no leading zeros in L and W, N's groups only as many as it needs. */
export function tilePath(tile: Tile): string {
  const digits = String(tile.index).padStart(3 * Math.ceil(Math.max(String(tile.index).length, 1) / 3), '0');
  const groups = digits.match(/\d{3}/g)!;
  const n = groups.map((g, i) => (i < groups.length - 1 ? `x${g}` : g)).join('/');
  return `${tile.level}/${n}${tile.width === null ? '' : `.p/${tile.width}`}`;
}
