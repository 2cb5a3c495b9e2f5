import { describe, expect, it } from 'vitest';
import type { EventsIngestCommand, NotOwner, OrgReply, ReplyTo } from '../../src/bus/messages.js';
import { eventGroup } from '../../src/actors/event-group.js';

const NOT_OWNER: NotOwner = { ok: false, code: 'not_owner', message: 'moved' };
const recorded = (n: number): OrgReply => ({ ok: true, value: { event_id: n } as never });

function gather(replies: (OrgReply | NotOwner)[], order = replies.map((_, i) => i)): ReplyTo<EventsIngestCommand> | NotOwner | undefined {
  let answer: ReplyTo<EventsIngestCommand> | NotOwner | undefined;
  const replyTo = eventGroup(replies.length, (reply) => (answer = reply));
  for (const i of order) {
    expect(answer).toBeUndefined(); // not before every event has its reply
    replyTo(i)(replies[i]!);
  }
  return answer;
}

describe('eventGroup', () => {
  it('answers once every event has its reply, each in its place whatever order they came in', () => {
    const refused: OrgReply = { ok: false, code: 'quota_exceeded', message: 'over' };
    expect(gather([recorded(1), refused, recorded(2)], [2, 0, 1])).toEqual({ ok: true, value: [recorded(1), refused, recorded(2)] });
  });

  it('is not_owner only when every event was: the router then sends the whole group again', () => {
    expect(gather([NOT_OWNER, NOT_OWNER])).toEqual(NOT_OWNER);
  });

  it('refuses unavailable the events not decided when others of the group were recorded (never sent twice)', () => {
    const answer = gather([recorded(1), NOT_OWNER]);
    expect(answer).toMatchObject({ ok: true, value: [recorded(1), { ok: false, code: 'unavailable' }] });
  });
});
