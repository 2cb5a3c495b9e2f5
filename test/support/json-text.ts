/**
 * Raw JSON text with a fragment spliced in: what JSON.stringify cannot write (1e999, a lone
 * surrogate escape, 5,000 levels of nesting, duplicate or `__proto__` member names) placed at a
 * chosen path of an otherwise valid body.
 */

export type Path = readonly (string | number)[];

export type Splice =
  /** Replaces the value at `at` (the whole body when `at` is []) with raw JSON text. */
  | { kind: 'value'; at: Path; text: string }
  /** Adds a member to the object at `at`: `name` is raw JSON string text (quotes included). */
  | { kind: 'member'; at: Path; name: string; text: string; first?: boolean };

/** The field path the service names for `path` in error details (`payload.a.0`; the root is `body`). */
export function fieldPath(path: Path): string {
  return path.length === 0 ? 'body' : path.map(String).join('.');
}

/** Every value's path in `value` (the root first), with whether it is an object. */
export function pathsOf(value: unknown, at: Path = []): { path: Path; object: boolean }[] {
  const out: { path: Path; object: boolean }[] = [{ path: at, object: isObject(value) }];
  if (Array.isArray(value)) value.forEach((item, i) => out.push(...pathsOf(item, [...at, i])));
  else if (isObject(value)) for (const [k, v] of Object.entries(value)) out.push(...pathsOf(v, [...at, k]));
  return out;
}

export function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** JSON text of `value` with `splice` applied. */
export function rawJson(value: unknown, splice: Splice): string {
  return emit(value, [], splice);
}

function samePath(a: Path, b: Path): boolean {
  return a.length === b.length && a.every((x, i) => String(x) === String(b[i]));
}

function emit(value: unknown, at: Path, splice: Splice): string {
  if (splice.kind === 'value' && samePath(at, splice.at)) return splice.text;
  if (Array.isArray(value)) return `[${value.map((v, i) => emit(v, [...at, i], splice)).join(',')}]`;
  if (isObject(value)) {
    const members = Object.entries(value).map(([k, v]) => `${JSON.stringify(k)}:${emit(v, [...at, k], splice)}`);
    if (splice.kind === 'member' && samePath(at, splice.at)) {
      const added = `${splice.name}:${splice.text}`;
      if (splice.first === true) members.unshift(added);
      else members.push(added);
    }
    return `{${members.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** `value` with the value at `path` replaced (`remove`: deleted), copied, not changed in place. */
export function withValue(value: unknown, path: Path, next: unknown, remove = false): unknown {
  if (path.length === 0) return next;
  const [head, ...rest] = path;
  if (Array.isArray(value)) {
    const copy = [...value];
    if (remove && rest.length === 0) copy.splice(Number(head), 1);
    else copy[Number(head)] = withValue(copy[Number(head)], rest, next, remove);
    return copy;
  }
  if (isObject(value)) {
    const copy: Record<string, unknown> = { ...value };
    if (remove && rest.length === 0) delete copy[String(head)];
    else Object.defineProperty(copy, String(head), { value: withValue(copy[String(head)], rest, next, remove), enumerable: true, writable: true, configurable: true });
    return copy;
  }
  return value;
}

/** `depth` levels of arrays (`[[[…]]]`) or objects (`{"a":{"a":…}}`) around `inner`. */
export function nested(depth: number, shape: 'array' | 'object', inner = '1'): string {
  return shape === 'array' ? '['.repeat(depth) + inner + ']'.repeat(depth) : '{"a":'.repeat(depth) + inner + '}'.repeat(depth);
}
