import { promisify } from 'node:util';
import { gunzipSync, gzip, gzipSync } from 'node:zlib';

const gzipAsync = promisify(gzip);

/**
 * A minimal POSIX ustar writer and reader for export bundles, gzipped with node:zlib. The writer
 * is deterministic (same files and mtime, same bytes); the reader is defensive because archives
 * come from outside: it returns regular files only and refuses anything it would have to trust.
 */

export interface TarEntry {
  name: string;
  content: Buffer;
}

/** Total content size the reader accepts (and the decompressed archive, give or take headers). */
export const TAR_MAX_BYTES = 256 * 1024 * 1024;

const BLOCK = 512;
/** Headers, padding and the end blocks on top of the content cap. */
const HEADER_SLACK = 1024 * 1024;
const MAX_OCTAL_11 = 0o77777777777;

export function writeTarGz(files: TarEntry[], mtimeSeconds: number): Buffer {
  return gzipSync(tarOf(files, mtimeSeconds), { level: 9 });
}

/** The same archive, compressed on the libuv thread pool so a server's event loop keeps running. */
export function writeTarGzAsync(files: TarEntry[], mtimeSeconds: number): Promise<Buffer> {
  return gzipAsync(tarOf(files, mtimeSeconds), { level: 6 });
}

function tarOf(files: TarEntry[], mtimeSeconds: number): Buffer {
  if (!Number.isInteger(mtimeSeconds) || mtimeSeconds < 0 || mtimeSeconds > MAX_OCTAL_11) throw new RangeError(`tar: bad mtime ${mtimeSeconds}`);
  const parts: Buffer[] = [];
  for (const file of files) {
    checkName(file.name);
    if (file.content.length > MAX_OCTAL_11) throw new RangeError(`tar: ${file.name} is too large for ustar`);
    parts.push(header(file.name, file.content.length, mtimeSeconds), file.content);
    const pad = (BLOCK - (file.content.length % BLOCK)) % BLOCK;
    if (pad > 0) parts.push(Buffer.alloc(pad));
  }
  parts.push(Buffer.alloc(2 * BLOCK));
  return Buffer.concat(parts);
}

function header(name: string, size: number, mtime: number): Buffer {
  const h = Buffer.alloc(BLOCK);
  const nameBytes = Buffer.from(name, 'utf8');
  if (nameBytes.length > 100) throw new RangeError(`tar: name longer than 100 bytes: ${name}`);
  nameBytes.copy(h, 0);
  h.write('0000644\0', 100, 'latin1');
  h.write('0000000\0', 108, 'latin1');
  h.write('0000000\0', 116, 'latin1');
  h.write(`${octal(size, 11)}\0`, 124, 'latin1');
  h.write(`${octal(mtime, 11)}\0`, 136, 'latin1');
  h.write('0', 156, 'latin1');
  h.write('ustar\0', 257, 'latin1');
  h.write('00', 263, 'latin1');
  h.write('0000000\0', 329, 'latin1');
  h.write('0000000\0', 337, 'latin1');
  h.write(`${octal(checksum(h), 6)}\0 `, 148, 'latin1');
  return h;
}

function octal(value: number, width: number): string {
  return value.toString(8).padStart(width, '0');
}

/** Sum of the header's bytes with the checksum field read as spaces. */
function checksum(h: Buffer): number {
  let sum = 8 * 0x20;
  for (let i = 0; i < BLOCK; i++) if (i < 148 || i >= 156) sum += h[i]!;
  return sum;
}

function checkName(name: string): void {
  if (name === '' || name.includes('\0')) throw new RangeError(`tar: bad entry name ${JSON.stringify(name)}`);
  if (name.startsWith('/')) throw new RangeError(`tar: absolute entry name ${name}`);
  if (name.split('/').includes('..')) throw new RangeError(`tar: entry name with a .. segment: ${name}`);
}

/**
 * Regular files only (directory entries are skipped); refuses absolute names, `..` segments,
 * links and other special entries, duplicate names, bad header checksums, truncated archives,
 * and archives whose entries total more than `maxBytes` (256 MiB by default), with a clear Error.
 */
export function readTarGz(archive: Buffer, options: { maxBytes?: number } = {}): TarEntry[] {
  const maxBytes = options.maxBytes ?? TAR_MAX_BYTES;
  let tar: Buffer;
  try {
    tar = gunzipSync(archive, { maxOutputLength: maxBytes + HEADER_SLACK });
  } catch (error) {
    const tooBig = error instanceof RangeError || (error as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE';
    throw new Error(tooBig ? `tar: archive is larger than the ${maxBytes}-byte cap` : `tar: not a gzip archive (${(error as Error).message})`, { cause: error });
  }
  const entries: TarEntry[] = [];
  const names = new Set<string>();
  let total = 0;
  let at = 0;
  while (at + BLOCK <= tar.length) {
    const h = tar.subarray(at, at + BLOCK);
    if (h.every((b) => b === 0)) return entries;
    const name = entryName(h);
    if (readOctal(h, 148, 8, name) !== checksum(h)) throw new Error(`tar: header checksum mismatch at ${name}`);
    const type = String.fromCharCode(h[156]!);
    if (h[124]! & 0x80) throw new Error(`tar: ${name} is larger than the ${maxBytes}-byte cap`);
    const size = readOctal(h, 124, 12, name);
    at += BLOCK;
    if (type === '5') {
      at += Math.ceil(size / BLOCK) * BLOCK;
      continue;
    }
    if (type !== '0' && type !== '\0') throw new Error(`tar: ${name} is not a regular file (entry type ${JSON.stringify(type)})`);
    checkName(name);
    if (names.has(name)) throw new Error(`tar: ${name} appears twice`);
    total += size;
    if (total > maxBytes) throw new Error(`tar: entries exceed the ${maxBytes}-byte cap at ${name}`);
    if (at + size > tar.length) throw new Error(`tar: archive truncated inside ${name}`);
    names.add(name);
    entries.push({ name, content: Buffer.from(tar.subarray(at, at + size)) });
    at += Math.ceil(size / BLOCK) * BLOCK;
  }
  if (at !== tar.length) throw new Error('tar: archive truncated inside a header');
  return entries;
}

/** The entry's path: ustar prefix + name (the prefix only in POSIX ustar, where GNU tar keeps other fields). */
function entryName(h: Buffer): string {
  const name = cString(h, 0, 100);
  const posix = h.toString('latin1', 257, 263) === 'ustar\0';
  const prefix = posix ? cString(h, 345, 155) : '';
  return prefix === '' ? name : `${prefix}/${name}`;
}

function cString(h: Buffer, offset: number, length: number): string {
  const field = h.subarray(offset, offset + length);
  const end = field.indexOf(0);
  return field.toString('utf8', 0, end === -1 ? length : end);
}

function readOctal(h: Buffer, offset: number, length: number, name: string): number {
  const text = h.toString('latin1', offset, offset + length).replace(/[\0 ]+$/, '').replace(/^ +/, '');
  if (!/^[0-7]+$/.test(text)) throw new Error(`tar: bad numeric field in the header of ${name}`);
  return parseInt(text, 8);
}
