import { Scope } from '../domain/schemas.js';
import { MONITOR_USAGE } from './monitor.js';

/** Each command's usage, printed by `vigil <command> --help` and `vigil help <command>`. */
export const COMMAND_USAGE = {
  serve: `usage: vigil serve
  Runs the service (embedded mode; cluster mode with VIGIL_NATS_URL). Configured by environment
  variables only (README, "Configuration"): VIGIL_PORT, VIGIL_DATA_DIR, VIGIL_LOG_LEVEL, …
  A first start on an empty data dir prints an admin key for org "default", once.
  Stops cleanly on SIGINT or SIGTERM.
exit status: 1 when it cannot start (a bad variable, the data dir held by another process, the port taken)`,
  keys: `usage: vigil keys <create|list|revoke> …
  vigil keys create --org <slug> --scopes <a,b,…> [--name <text>]
      creates an API key (and the org if needed); prints a JSON line, then the key alone on the
      last line (shown only now)
  vigil keys list --org <slug>
      the org's keys, a JSON line each: id, name, scopes, created_at, last_used_at, revoked_at;
      never a secret
  vigil keys revoke <key_id>
      revokes a key (key_…, as create and list print it): refused from then on, on every node
scopes: ${Scope.join(', ')}
Reads the data dir of VIGIL_DATA_DIR (or the cluster of VIGIL_NATS_URL); works beside a running server.
exit status: 0 done; 1 an error (e.g. no such key); 2 bad arguments`,
  orgs: `usage: vigil orgs set-plan --org <slug> --plan <free|team|scale> [--billing-email <address>]
  Sets an org's plan, creating the org on that plan if it does not exist. Prints a JSON line
  (org, plan, billing_email, previous_plan: null when it created the org), then what it did:
  "created org acme on plan team" or "org acme: plan free -> team".
Reads the data dir of VIGIL_DATA_DIR (or the cluster of VIGIL_NATS_URL); works beside a running server.
exit status: 0 done; 1 an error; 2 bad arguments (a bad slug, an unknown plan, a bad e-mail address)`,
  verify: `usage: vigil verify <ledger.jsonl> [--progress]
       vigil verify <bundle.tar.gz|bundle dir> [--manifest-sha256 <hex>] [--key <vkey|@file>]
  A ledger file (GET /audit/export): checks every record's hash and its link to the one before,
  offline, with the server's own chain code. Prints a JSON report, then OK or FAILED with the first
  bad seq (an export cut short by a damaged row ends with an error line: it fails there).
  A bundle (POST /exports/bundle): checks its chain, its manifest, and its records against the
  signed log checkpoint it carries.
  --manifest-sha256 <hex>  the bundle's digest as GET /exports lists it: the bundle must match it
  --key <vkey>             the log's verifier key (GET /public/log-key), or @<file> holding it:
                           the checkpoint must be signed by it
  --progress               for a ledger file: progress on stderr even when it is not a terminal
                           (on a terminal it is shown anyway): records and bytes read, once a second
exit status: 0 valid; 1 invalid (or unreadable); 2 bad arguments`,
  monitor: MONITOR_USAGE,
} as const;

export type Command = keyof typeof COMMAND_USAGE;

export const isCommand = (name: string): name is Command => Object.hasOwn(COMMAND_USAGE, name);

export const USAGE = `usage: vigil <command> [arguments]
  serve      run the service
  keys       create, list or revoke API keys (keys create --org <slug> --scopes a,b)
  orgs       set an org's plan (orgs set-plan --org <slug> --plan <plan>)
  verify     verify an exported ledger or an export bundle, offline
  monitor    follow an org's public log checkpoints and raise an alarm on a fork
  help       this text; help <command>: that command's usage (also: vigil <command> --help)
Bad arguments print one line saying what is wrong and exit 2 (monitor: 1; its 2 is an alarm).`;
