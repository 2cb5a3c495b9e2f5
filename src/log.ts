import { pino, type DestinationStream, type Logger as PinoLogger } from 'pino';

/**
 * The one logger: pino, JSON lines. It is created once by the CLI (or a test) and passed down to
 * whatever logs; nothing imports a global one. Secrets never belong in a log line; the redaction
 * below is the net under that rule, not the rule.
 */
export type Logger = PinoLogger;

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/** Field paths whose values are replaced by `[redacted]` wherever they appear in a log line. */
const REDACT = ['authorization', 'key', 'secret', 'api_key', 'token', 'password', '*.authorization', '*.key', '*.secret', '*.api_key', '*.token', '*.password', 'headers.authorization'];

/**
 * A logger writing JSON lines to `destination` (stdout by default): `{"level":"info","time":
 * "<RFC 3339>", …fields, "msg": "…"}`.
 */
export function createLogger(level: LogLevel = 'info', destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: undefined,
      timestamp: pino.stdTimeFunctions.isoTime,
      formatters: { level: (label) => ({ level: label }) },
      redact: { paths: REDACT, censor: '[redacted]' },
    },
    destination,
  );
}

/** A logger that drops everything (tests that do not look at logs). */
export function silentLogger(): Logger {
  return createLogger('silent');
}
