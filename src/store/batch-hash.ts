import { createRequire } from 'node:module';
import type { Sha256Rows, Sha256Many } from '../domain/ledger-batch.js';
import type { Sha256Nodes } from '../domain/striped-tree.js';

/**
 * The optional native batch SHA-256 (src/native, built by `npm install` where a C compiler is
 * present): one call hashes many messages with OpenSSL's SHA-256, so verification and appends pay
 * the per-call cost of node:crypto once per batch instead of twice per record. Null when not built.
 */
const addon = ((): { sha256Many: Sha256Many; sha256Rows: Sha256Rows; sha256Nodes?: Sha256Nodes } | null => {
  try {
    return createRequire(import.meta.url)('../native/build/Release/vigil_sha256.node') as { sha256Many: Sha256Many; sha256Rows: Sha256Rows; sha256Nodes?: Sha256Nodes };
  } catch {
    return null;
  }
})();

export const nativeSha256Many: Sha256Many | null = addon?.sha256Many ?? null;
export const nativeSha256Rows: Sha256Rows | null = addon?.sha256Rows ?? null;
export const nativeSha256Nodes: Sha256Nodes | null = addon?.sha256Nodes ?? null;
