import { createPrivateKey, generateKeyPairSync, type KeyObject } from 'node:crypto';
import { Kvm, type KV } from '@nats-io/kv';
import type { NatsConnection } from '@nats-io/transport-node';
import { rawPublicKey } from '../domain/signed-note.js';
import { CLUSTER_BUCKET } from './cluster-settings.js';

/** This node's VIGIL_LOG_KEY is not the key the cluster signs with: its checkpoints would not verify. */
export class LogKeyDiffersError extends Error {
  override readonly name = 'LogKeyDiffersError';
  readonly code = 'log_key_differs';
}

/**
 * The cluster's one log key (DESIGN §10: nodes share it, so every checkpoint and receipt verifies
 * with the one published key), agreed in the settings bucket as the partition count is: the first
 * node stores its public key (`log-public-key`) and every later node must sign with the same.
 *
 * A node given VIGIL_LOG_KEY (`own`) signs with it, and only its public key goes to NATS. A node
 * without takes the private key the cluster keeps in the bucket (`log-key`, PKCS#8 PEM, made by the
 * first such node), so a cluster works with no key set up at all; an operator who would keep the
 * private key out of NATS sets VIGIL_LOG_KEY on every node.
 */
export async function ensureClusterLogKey(nc: NatsConnection, own: KeyObject | null, options: { replicas: number; bucket?: string }): Promise<KeyObject> {
  const bucket = options.bucket ?? CLUSTER_BUCKET;
  const kv = await new Kvm(nc).create(bucket, { history: 1, replicas: options.replicas });
  let key = own;
  if (key === null) {
    const made = generateKeyPairSync('ed25519').privateKey.export({ format: 'pem', type: 'pkcs8' }).toString();
    const pem = await createOrGet(kv, 'log-key', made);
    try {
      key = createPrivateKey({ key: pem, format: 'pem' });
    } catch (error) {
      throw new Error(`KV bucket ${bucket} holds a log-key that is not a PKCS#8 PEM private key`, { cause: error });
    }
    if (key.asymmetricKeyType !== 'ed25519') throw new Error(`KV bucket ${bucket} holds a log-key that is not Ed25519`);
  }
  const mine = rawPublicKey(key).toString('base64');
  const agreed = await createOrGet(kv, 'log-public-key', mine);
  if (agreed !== mine) {
    throw new LogKeyDiffersError(
      own === null
        ? `the cluster signs with a log key given by VIGIL_LOG_KEY on another node (public key ${agreed}): set VIGIL_LOG_KEY to the same key here`
        : `VIGIL_LOG_KEY is not the cluster's log key (public key ${agreed}): every node must sign with the same key`,
    );
  }
  return key;
}

/** Stores `value` under `key` unless it is there already (of nodes racing exactly one wins); the stored value. */
async function createOrGet(kv: KV, key: string, value: string): Promise<string> {
  try {
    await kv.create(key, value);
    return value;
  } catch (error) {
    const stored = await kv.get(key);
    if (stored === null || stored.operation !== 'PUT') throw error; // not refused for being there: the create failed
    return stored.string();
  }
}

/**
 * The host the cluster's log origins are named by (see loadLogOrigin), agreed as the key is: the
 * first node stores its base URL's host, every node names the log by it.
 */
export async function ensureClusterLogOrigin(nc: NatsConnection, host: string, options: { replicas: number; bucket?: string }): Promise<string> {
  const kv = await new Kvm(nc).create(options.bucket ?? CLUSTER_BUCKET, { history: 1, replicas: options.replicas });
  return createOrGet(kv, 'log-origin', host);
}
