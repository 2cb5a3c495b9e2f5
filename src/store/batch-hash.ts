import { createRequire } from 'node:module';
import type { Sha256Many } from '../domain/ledger-batch.js';

/**
 * The optional native batch SHA-256 (src/native, built by `npm install` where a C compiler is
 * present): one call hashes many messages with OpenSSL's SHA-256, so verification pays the
 * per-call cost of node:crypto once per batch instead of twice per record. Null when not built.
 */
export const nativeSha256Many: Sha256Many | null = (() => {
  try {
    const addon = createRequire(import.meta.url)('../native/build/Release/vigil_sha256.node') as { sha256Many: Sha256Many };
    return addon.sha256Many;
  } catch {
    return null;
  }
})();
