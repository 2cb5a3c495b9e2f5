import { parseVerifierKey, verifyReceipt as verifySigned, type Receipt } from '../domain/signed-note.js';

/**
 * Whether `receipt` is signed by the log key `verifierKey` (the C2SP verifier key served at
 * `GET /public/log-key`). A valid receipt is the log's signed promise that the record with
 * `leaf_hash` is leaf `seq - 1` of the org's tree named by `origin`; an inclusion proof against a
 * later checkpoint shows the promise kept.
 */
export function verifyReceipt(receipt: Receipt, verifierKey: string): boolean {
  const key = parseVerifierKey(verifierKey.trim());
  if (key === null) throw new TypeError('not a C2SP verifier key (<name>+<hex id>+<base64 key>)');
  return verifySigned(receipt, receipt.signature, key);
}
