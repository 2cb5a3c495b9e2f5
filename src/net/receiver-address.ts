import { promises as dns } from 'node:dns';
import { BlockList, isIP } from 'node:net';

/**
 * Which addresses a webhook may reach. Receivers are customer URLs, so without this check a
 * customer could make the server call its own loopback, the private network or the cloud
 * metadata endpoint (SSRF). Checked when a receiver is created and again at connection time.
 */

/** Resolves a hostname to every address it has; injectable so tests can simulate DNS. */
export type Lookup = (hostname: string) => Promise<{ address: string; family: number }[]>;

/** The operating system's resolver (hosts file, then DNS), every address, in resolver order. */
export const systemLookup: Lookup = (hostname) => dns.lookup(hostname, { all: true, verbatim: true });

const V4_RANGES: readonly (readonly [string, number])[] = [
  ['0.0.0.0', 8], // "this network", includes the unspecified address
  ['10.0.0.0', 8], // RFC 1918
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8], // loopback
  ['169.254.0.0', 16], // link-local, includes cloud metadata 169.254.169.254
  ['172.16.0.0', 12], // RFC 1918
  ['192.0.0.0', 24], // IETF protocol assignments
  ['192.0.2.0', 24], // documentation (TEST-NET-1): never a real receiver
  ['192.168.0.0', 16], // RFC 1918
  ['198.18.0.0', 15], // benchmarking
  ['198.51.100.0', 24], // documentation (TEST-NET-2)
  ['203.0.113.0', 24], // documentation (TEST-NET-3)
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, includes broadcast 255.255.255.255
];

const V6_RANGES: readonly (readonly [string, number])[] = [
  ['::', 96], // unspecified ::, loopback ::1 and deprecated IPv4-compatible ::a.b.c.d
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215): translates into the operator's own network
  ['100::', 64], // discard-only
  ['2001:db8::', 32], // documentation
  ['fc00::', 7], // unique-local, includes AWS metadata fd00:ec2::254
  ['fe80::', 10], // link-local
  ['fec0::', 10], // deprecated site-local
  ['ff00::', 8], // multicast
];

const forbidden = buildBlockList();

function buildBlockList(): BlockList {
  const list = new BlockList();
  for (const [prefix, bits] of V4_RANGES) list.addSubnet(prefix, bits, 'ipv4');
  for (const [prefix, bits] of V6_RANGES) list.addSubnet(prefix, bits, 'ipv6');
  return list;
}

/**
 * True if an IP address (v4 or v6 text) is one a webhook must not reach: loopback, unspecified,
 * private (RFC 1918), CGNAT 100.64/10, link-local 169.254/16 (cloud metadata 169.254.169.254) and
 * fe80::/10, unique-local fc00::/7 (includes fd00:ec2::254), multicast, reserved 240/4, broadcast,
 * 0/8, 192.0.0.0/24, 198.18/15 benchmarking, IPv4-mapped (::ffff:a.b.c.d) and NAT64 64:ff9b::/96
 * forms of any of those, ::1, ::. Text that is not an IP address counts as forbidden (fail closed).
 */
export function isForbiddenAddress(ip: string): boolean {
  const address = ip.replace(/%.*$/, ''); // a zone id (fe80::1%eth0) does not change the range
  switch (isIP(address)) {
    case 4:
      return forbidden.check(address, 'ipv4');
    case 6: {
      const v4 = embeddedIpv4(address);
      return forbidden.check(address, 'ipv6') || (v4 !== null && forbidden.check(v4, 'ipv4'));
    }
    default:
      return true;
  }
}

/**
 * The IPv4 address an IPv6 address carries and would be delivered to: IPv4-mapped ::ffff:0:0/96,
 * IPv4-translated ::ffff:0:0:0/96, NAT64 64:ff9b::/96 and 6to4 2002::/16. Null for any other.
 */
function embeddedIpv4(ipv6: string): string | null {
  const g = ipv6Groups(ipv6);
  const zero = (from: number, to: number) => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 5) && g[5] === 0xffff) return ipv4Of(g[6], g[7]);
  if (zero(0, 4) && g[4] === 0xffff && g[5] === 0) return ipv4Of(g[6], g[7]);
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return ipv4Of(g[6], g[7]);
  if (g[0] === 0x2002) return ipv4Of(g[1], g[2]);
  return null;
}

/** The eight 16-bit groups of IPv6 text already validated by isIP (handles :: and a dotted tail). */
function ipv6Groups(ipv6: string): number[] {
  const text = ipv6.replace(/(\d+)\.(\d+)\.(\d+)\.(\d+)$/, (_m, a: string, b: string, c: string, d: string) =>
    [(Number(a) << 8) | Number(b), (Number(c) << 8) | Number(d)].map((n) => n.toString(16)).join(':'),
  );
  const [head = '', tail] = text.split('::');
  const parse = (part: string) => (part === '' ? [] : part.split(':').map((h) => parseInt(h, 16)));
  const left = parse(head);
  const right = tail === undefined ? [] : parse(tail);
  return [...left, ...new Array<number>(8 - left.length - right.length).fill(0), ...right];
}

function ipv4Of(high = 0, low = 0): string {
  return [high >> 8, high & 0xff, low >> 8, low & 0xff].join('.');
}

const ALLOW_HINT = 'receivers must be public (set VIGIL_WEBHOOK_ALLOW_PRIVATE=1 to allow)';

/**
 * Checks a receiver URL at creation: must parse, be http: or https:, have no credentials
 * (user:pass@); unless allowPrivate, the host (an IP literal, or every address it resolves to) must
 * not be forbidden; a hostname must resolve (even with allowPrivate: a receiver that cannot be
 * reached is a mistake worth reporting at creation). Returns null when fine, else a message naming
 * the problem. Passing this once does not make later deliveries safe: DNS can change, so the sender
 * checks again at connection time.
 */
export async function checkReceiverUrl(
  url: string,
  options: { allowPrivate: boolean; lookup?: Lookup },
): Promise<string | null> {
  const parsed = parseReceiverUrl(url);
  if (typeof parsed === 'string') return parsed;
  const host = parsed.hostname.replace(/^\[|\]$/g, '');
  if (isIP(host) !== 0) {
    return options.allowPrivate || !isForbiddenAddress(host) ? null : `url host ${host} is a loopback/private address; ${ALLOW_HINT}`;
  }
  const addresses = await resolveAll(host, options.lookup ?? systemLookup);
  if (typeof addresses === 'string') return addresses;
  const bad = options.allowPrivate ? undefined : addresses.find(isForbiddenAddress);
  return bad === undefined ? null : `url resolves to ${bad}, a loopback/private address; ${ALLOW_HINT}`;
}

/** The URL, or a message saying why it cannot be a receiver. */
function parseReceiverUrl(url: string): URL | string {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'url is not a valid absolute URL';
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    return `url scheme ${parsed.protocol} is not allowed; use http: or https:`;
  }
  if (parsed.username !== '' || parsed.password !== '') return 'url must not contain credentials (user:pass@)';
  if (parsed.hostname === '') return 'url has no host';
  return parsed;
}

/** Every address of a hostname, or a message when it has none. */
async function resolveAll(host: string, lookup: Lookup): Promise<string[] | string> {
  try {
    const found = await lookup(host);
    return found.length > 0 ? found.map((a) => a.address) : `url host ${host} does not resolve`;
  } catch (err) {
    const code = (err as NodeJS.ErrnoException | null)?.code;
    return `url host ${host} does not resolve${code ? ` (${code})` : ''}`;
  }
}
