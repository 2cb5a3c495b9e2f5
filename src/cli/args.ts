import { readFile } from 'node:fs/promises';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { parseVerifierKey, type NoteKey } from '../domain/signed-note.js';

type ParsedResults<T extends ParseArgsConfig> = ReturnType<typeof parseArgs<T>>;

/** Wrong command-line arguments: the CLI prints one line (usageLine) and exits 2 (monitor: 1). */
export class UsageError extends Error {
  override name = 'UsageError';
  readonly code = 'usage';
}

/** `vigil keys: <message> (see vigil keys --help)`: the one line a bad argument gets. */
export function usageLine(command: string | null, message: string): string {
  return command === null ? `vigil: ${oneLine(message)} (see vigil help)` : `vigil ${command}: ${oneLine(message)} (see vigil ${command} --help)`;
}

/** A message on one line: whatever breaks a line becomes a space. */
export const oneLine = (message: string): string => message.replace(/\s*[\r\n]+\s*/g, ' ').trim();

type Options = NonNullable<ParseArgsConfig['options']>;

const HELP = { help: { type: 'boolean', short: 'h' } } as const;

/**
 * A command's arguments, parsed strictly, with `--help`/`-h` (values.help) added to its options.
 * An unknown option, a missing option value or a stray positional becomes a UsageError.
 */
export function parseCommand<const O extends Options>(args: string[], options: O, maxPositionals = Infinity) {
  const config = { args, allowPositionals: true, strict: true, options: { ...options, ...HELP } } as const;
  let parsed: ParsedResults<typeof config>;
  try {
    parsed = parseArgs(config);
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? '';
    // Node's text for an unknown option goes on about '--'; its first sentence says it all.
    if (code.startsWith('ERR_PARSE_ARGS_')) throw new UsageError((error as Error).message.replace(/\. To specify a positional argument.*$/s, ''), { cause: error });
    throw error;
  }
  if ((parsed.values as { help?: boolean }).help !== true && parsed.positionals.length > maxPositionals) {
    throw new UsageError(`unexpected argument ${parsed.positionals[maxPositionals]}`);
  }
  return parsed;
}

/** `--key`: a verifier key, or `@file` holding one. */
export async function verifierKeyOf(value: string): Promise<NoteKey> {
  let text = value;
  if (value.startsWith('@')) {
    try {
      text = await readFile(value.slice(1), 'utf8');
    } catch (error) {
      throw new UsageError(`--key: cannot read ${value.slice(1)} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
  }
  const key = parseVerifierKey(text);
  if (key === null) throw new UsageError(`--key: ${value.startsWith('@') ? `${value.slice(1)} does not hold` : 'not'} a verifier key <name>+<8 hex key id>+<base64 of 0x01 and the Ed25519 public key>, as GET /public/log-key serves it`);
  return key;
}
