import { createLogger, silentLogger, type Logger } from '../../src/log.js';

/** A log line as tests read it: the message and its fields (level and time left out). */
export interface LogLine {
  msg: string;
  fields?: Record<string, unknown>;
  level?: string;
}

/**
 * A real pino logger whose JSON lines are parsed into `lines` as they are written; with `level`,
 * each entry also says its level (else the level is there but not enumerable, out of `toEqual`).
 */
export function captureLogger(lines: LogLine[], options: { level?: boolean } = {}): Logger {
  return createLogger('debug', {
    write(line: string) {
      const { level, time: _time, msg, ...fields } = JSON.parse(line) as Record<string, unknown>;
      const entry: LogLine = { msg: String(msg) };
      if (Object.keys(fields).length > 0) entry.fields = fields;
      Object.defineProperty(entry, 'level', { value: level, enumerable: options.level === true });
      lines.push(entry);
    },
  });
}

export { silentLogger };
