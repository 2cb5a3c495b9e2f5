import type { CommandHandler } from '../bus/command-router.js';
import type { DeliveryActor } from './delivery-actor.js';
import type { OrgActors } from './org-actors.js';

/**
 * What the node that owns an org answers for it: ledger commands go to the org's writer, a
 * delivery retry to the delivery actor (the one that sends the org's deliveries).
 */
export function ownerHandler(actors: OrgActors, deliveries?: DeliveryActor): CommandHandler {
  return (command, options) => {
    if (command.type !== 'delivery.retry') return actors.handle(command, options);
    if (deliveries === undefined) {
      return Promise.resolve({ ok: false, code: 'unavailable', message: 'this process sends no webhook deliveries' });
    }
    return deliveries.retry(command, options?.abandoned);
  };
}
