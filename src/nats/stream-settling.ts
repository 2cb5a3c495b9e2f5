import { JetStreamApiCodes, JetStreamApiError } from '@nats-io/jetstream';
import { TimeoutError } from '@nats-io/transport-node';

/** The server's code for "stream name already in use with a different configuration". */
export const STREAM_NAME_IN_USE = 10058;

/**
 * Runs one step of making or opening a stream, again while the cluster is still settling a stream
 * that another node made a moment ago. Nodes of a cluster start together and each creates the
 * streams it needs; measured on a 3-server cluster, the one that loses the race can see, for a
 * moment, any of:
 * - "stream not found" from an info request after its own create was refused as a duplicate;
 * - "stream name already in use" from a create after an info request said it was not there;
 * - no answer at all to an info request while the new stream's replicas elect a leader.
 *
 * Only those three are retried, with a growing pause, until `withinMs`; anything else, or the last
 * failure once the time is up, is thrown.
 */
export async function whileSettling<T>(step: () => Promise<T>, withinMs = 30_000): Promise<T> {
  const deadline = Date.now() + withinMs;
  for (let pause = 50; ; pause = Math.min(pause * 2, 1000)) {
    try {
      return await step();
    } catch (error) {
      if (!settling(error) || Date.now() + pause > deadline) throw error;
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }
}

function settling(error: unknown): boolean {
  if (error instanceof TimeoutError) return true;
  return error instanceof JetStreamApiError && (error.code === JetStreamApiCodes.StreamNotFound || error.code === STREAM_NAME_IN_USE);
}
