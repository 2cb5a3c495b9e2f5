import type { EventReply, EventsIngestCommand, NotOwner, OrgReply, ReplyTo } from '../bus/messages.js';

/** An event of a group the writer refused by its fence while others of the group were recorded. */
const NOT_RECORDED: EventReply = {
  ok: false,
  code: 'unavailable',
  message: 'the org changed owner before this event was decided; nothing of it was recorded, send it again with its idempotency key',
};

/**
 * Gathers the replies to the events of one `events.ingest` command, queued one by one, into its
 * one reply: `resolve` runs once every event has its reply. Each event's reply is what its
 * `event.ingest` would get, with one exception: `not_owner` (the writer lost the org, nothing of
 * the event written) is the whole group's reply only when every event got it, so the router sends
 * the group again; otherwise those events are refused `unavailable` alone, as the others are
 * recorded and must not be sent again.
 */
export function eventGroup(size: number, resolve: (reply: ReplyTo<EventsIngestCommand> | NotOwner) => void): (index: number) => (reply: OrgReply | NotOwner) => void {
  const replies = new Array<OrgReply | NotOwner>(size);
  let left = size;
  return (index) => (reply) => {
    replies[index] = reply;
    if (--left === 0) resolve(groupReply(replies));
  };
}

function groupReply(replies: (OrgReply | NotOwner)[]): ReplyTo<EventsIngestCommand> | NotOwner {
  const notOwner = (reply: OrgReply | NotOwner): reply is NotOwner => !reply.ok && reply.code === 'not_owner';
  if (replies.every(notOwner)) return replies[0] as NotOwner;
  return { ok: true, value: replies.map((reply) => (notOwner(reply) ? NOT_RECORDED : (reply as EventReply))) };
}
