/**
 * How the stream feeds (StreamFeed, KvFeed) pull from the ordered consumers they make, and when
 * they make another.
 */

/** How long a failed renewal waits before the next try. */
export const RETRY_MS = 1000;

/**
 * Pulls expire after 5 s with a server heartbeat every second: two missed heartbeats (the server
 * holding the consumer is gone; R1 consumers are not replicated) are noticed in about 2 s, where
 * the client's defaults (30 s / 15 s) would leave the feed silent for half a minute.
 */
export const PULL = { expires: 5000, idle_heartbeat: 1000 };

/** What the client reports when the consumer it pulls from is gone or is being replaced. */
export const LOST: ReadonlySet<string> = new Set(['reset', 'heartbeats_missed', 'consumer_deleted', 'consumer_not_found', 'stream_not_found']);
