import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** Where the log key is made on first start when VIGIL_LOG_KEY names none. */
export const LOG_KEY_FILE = 'log-key.pem';
/** Where the log's name (the host its origins start with) is kept from the first start. */
export const LOG_ORIGIN_FILE = 'log-origin';

/**
 * The host the log's origins are named by (`<host>/vigil/<org>`, DESIGN §10), fixed at the first
 * start from the base URL's host and kept in the data dir: a log's name must not change with the
 * port or the address it is served at, or every monitor, page and bundle that remembers it would
 * see another log. Returns the kept host, and whether the base URL now names another.
 */
export function loadLogOrigin(dataDir: string, host: string): { host: string; differs: boolean } {
  const file = join(dataDir, LOG_ORIGIN_FILE);
  let kept: string;
  try {
    kept = readFileSync(file, 'utf8').trim();
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot read the log's origin ${file}`, { cause: error });
    writeFileSync(file, `${host}\n`, { flag: 'wx' });
    return { host, differs: false };
  }
  if (!/^[^\s/]+$/.test(kept)) throw new Error(`the log's origin file ${file} holds ${JSON.stringify(kept)}, not a host`);
  return { host: kept, differs: kept !== host };
}

/**
 * The transparency log's Ed25519 signing key (DESIGN §10): the PKCS#8 PEM at `path`, or
 * `log-key.pem` in the data dir, made there (mode 0600) on first start. A file that is not an
 * Ed25519 private key stops the start with an error naming it.
 */
export function loadLogKey(dataDir: string, path: string | undefined): KeyObject {
  const file = path ?? join(dataDir, LOG_KEY_FILE);
  let pem: string;
  try {
    pem = readFileSync(file, 'utf8');
  } catch (error) {
    if (path !== undefined || (error as NodeJS.ErrnoException).code !== 'ENOENT') throw new Error(`cannot read the log key ${file}`, { cause: error });
    pem = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    // 'wx': two processes never both make one (the data dir lock already keeps a second out).
    writeFileSync(file, pem, { mode: 0o600, flag: 'wx' });
  }
  let key: KeyObject;
  try {
    key = createPrivateKey({ key: pem, format: 'pem' });
  } catch (error) {
    throw new Error(`the log key ${file} is not a PKCS#8 PEM private key`, { cause: error });
  }
  if (key.asymmetricKeyType !== 'ed25519') throw new Error(`the log key ${file} is an ${key.asymmetricKeyType ?? 'unknown'} key, not Ed25519`);
  return key;
}
