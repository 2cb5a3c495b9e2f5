import type { CommandHandler } from '../bus/command-router.js';
import type { OrgReply, ReadForwardCommand } from '../bus/messages.js';
import type { DeliveryActor } from './delivery-actor.js';
import type { OrgActors } from './org-actors.js';

/**
 * What the node that owns an org answers for it: ledger commands go to the org's writer, a
 * delivery retry to the delivery actor (the one that sends the org's deliveries), a forwarded
 * read to the routes (cluster mode's KeyedReads).
 */
export function ownerHandler(actors: OrgActors, deliveries?: DeliveryActor, reads?: { serve(command: ReadForwardCommand): Promise<OrgReply> }): CommandHandler {
  return (command, options) => {
    if (command.type === 'read.forward') {
      return reads?.serve(command) ?? Promise.resolve({ ok: false, code: 'unavailable', message: 'this process answers no forwarded reads' });
    }
    if (command.type !== 'delivery.retry') return actors.handle(command, options);
    if (deliveries === undefined) {
      return Promise.resolve({ ok: false, code: 'unavailable', message: 'this process sends no webhook deliveries' });
    }
    return deliveries.retry(command, options?.abandoned);
  };
}
