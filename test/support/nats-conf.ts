/**
 * A reader for the part of nats-server's config syntax that docker-compose.yml uses: `key: value`
 * (or `key = value`, or `key value`), `{ … }` blocks, `[ … ]` lists split by commas or new lines,
 * quoted and bare strings, numbers, booleans, `#` and `//` comments. No includes, no variables.
 * What it reads can be written back as JSON, which nats-server also accepts as a config.
 */
export type NatsConfValue = string | number | boolean | NatsConfValue[] | NatsConf;
export interface NatsConf {
  [key: string]: NatsConfValue;
}

export function parseNatsConf(text: string): NatsConf {
  let at = 0;
  const fail = (why: string): never => {
    const line = text.slice(0, at).split('\n').length;
    throw new Error(`nats config, line ${line}: ${why}`);
  };
  /** Skips blanks, and with `separators` also new lines, commas, semicolons and comments. */
  const skip = (separators: boolean): void => {
    while (at < text.length) {
      const c = text[at]!;
      if (c === ' ' || c === '\t' || c === '\r') at++;
      else if (separators && (c === '\n' || c === ',' || c === ';')) at++;
      else if (separators && (c === '#' || text.startsWith('//', at))) at = text.indexOf('\n', at) === -1 ? text.length : text.indexOf('\n', at);
      else return;
    }
  };
  const map = (close: string | null): NatsConf => {
    const out: NatsConf = {};
    for (;;) {
      skip(true);
      if (at >= text.length) return close === null ? out : fail(`missing ${close}`);
      if (text[at] === close) {
        at++;
        return out;
      }
      const key = /^[^\s:={}[\],;#]+/.exec(text.slice(at))?.[0] ?? fail(`a key expected at ${JSON.stringify(text.slice(at, at + 20))}`);
      at += key.length;
      skip(false);
      if (text[at] === ':' || text[at] === '=') at++;
      skip(false);
      out[key] = value();
    }
  };
  const list = (): NatsConfValue[] => {
    const out: NatsConfValue[] = [];
    for (;;) {
      skip(true);
      if (at >= text.length) return fail('missing ]');
      if (text[at] === ']') {
        at++;
        return out;
      }
      out.push(value());
    }
  };
  const value = (): NatsConfValue => {
    const c = text[at];
    if (c === '{' || c === '[') {
      at++;
      return c === '{' ? map('}') : list();
    }
    if (c === '"' || c === "'") {
      const end = text.indexOf(c, at + 1);
      if (end === -1) fail('unterminated string');
      const quoted = text.slice(at + 1, end);
      at = end + 1;
      return quoted;
    }
    const bare = /^[^\s,;\]}#]+/.exec(text.slice(at))?.[0] ?? fail('a value expected');
    at += bare.length;
    if (bare === 'true' || bare === 'false') return bare === 'true';
    return /^-?\d+$/.test(bare) ? Number(bare) : bare;
  };
  return map(null);
}

/** `conf[key]` as text (a string, or a number such as a port); throws for a block, a list or nothing. */
export function confText(conf: NatsConf, key: string): string {
  const value = conf[key];
  if (typeof value !== 'string' && typeof value !== 'number') throw new Error(`nats config: ${key} is not a single value`);
  return String(value);
}

/** `conf[key]` as a block; throws for anything else. */
export function confBlock(conf: NatsConf, key: string): NatsConf {
  const value = conf[key];
  if (typeof value !== 'object' || Array.isArray(value)) throw new Error(`nats config: ${key} is not a block`);
  return value;
}
