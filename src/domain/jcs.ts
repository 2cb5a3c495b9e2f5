/**
 * RFC 8785 JSON Canonicalization Scheme.
 * Numbers use ECMAScript's shortest round-trip form (what RFC 8785 specifies), strings use
 * JSON.stringify's escaping (lowercase \u00XX for controls, U+2028 left as is), and object keys are
 * sorted by UTF-16 code units, which is what Array.prototype.sort compares by default.
 */
export function canonicalize(value: unknown): string {
  switch (typeof value) {
    case 'string':
      return JSON.stringify(value);
    case 'number':
      if (!Number.isFinite(value)) throw new TypeError('JCS: non-finite number');
      return Object.is(value, -0) ? '0' : String(value);
    case 'boolean':
      return value ? 'true' : 'false';
    case 'object': {
      if (value === null) return 'null';
      if (Array.isArray(value)) {
        let out = '[';
        for (let i = 0; i < value.length; i++) {
          if (i > 0) out += ',';
          const item: unknown = value[i];
          out += item === undefined ? 'null' : canonicalize(item);
        }
        return out + ']';
      }
      const record = value as Record<string, unknown>;
      const keys = Object.keys(record).sort();
      let out = '{';
      let first = true;
      for (const key of keys) {
        const item = record[key];
        if (item === undefined) continue;
        if (!first) out += ',';
        first = false;
        out += JSON.stringify(key) + ':' + canonicalize(item);
      }
      return out + '}';
    }
    default:
      throw new TypeError(`JCS: cannot encode ${typeof value}`);
  }
}
