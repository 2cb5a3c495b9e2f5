import type { CommandHandler } from '../bus/bus.js';
import type { Bus } from '../bus/bus.js';
import type { OrgCommand, OrgReply } from '../bus/messages.js';
import { OrgLedgerActor, type OrgActorOptions } from './org-ledger-actor.js';

/**
 * Owns the org writers of this node: starts an org's actor on its first command (recovering it
 * from the ledger) and routes every command to it. Commands that arrive while the actor is
 * starting wait for it, in order.
 */
export class OrgActors {
  private readonly actors = new Map<string, OrgLedgerActor | Promise<OrgLedgerActor>>();

  constructor(
    private readonly bus: Bus,
    private readonly options: OrgActorOptions,
  ) {}

  readonly handle: CommandHandler = (command: OrgCommand): Promise<OrgReply> => {
    const actor = this.actors.get(command.org);
    if (actor instanceof OrgLedgerActor) return actor.submit(command);
    return this.starting(command.org, actor).then((a) => a.submit(command));
  };

  private starting(org: string, existing: Promise<OrgLedgerActor> | undefined): Promise<OrgLedgerActor> {
    if (existing !== undefined) return existing;
    const promise = OrgLedgerActor.start(org, this.bus, this.options).then(
      (actor) => {
        this.actors.set(org, actor);
        return actor;
      },
      (error: unknown) => {
        this.actors.delete(org);
        throw error;
      },
    );
    this.actors.set(org, promise);
    return promise;
  }
}
