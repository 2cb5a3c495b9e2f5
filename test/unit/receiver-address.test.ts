import { describe, expect, it } from 'vitest';
import { checkReceiverUrl, isForbiddenAddress, type Lookup } from '../../src/net/receiver-address.js';

const allowed = ['8.8.8.8', '1.1.1.1', '93.184.216.34', '2606:4700::1111', '2a00:1450:4001:82b::200e', '::ffff:8.8.8.8', '64:ff9b::808:808'];

const forbidden: [string, string][] = [
  ['127.0.0.5', 'loopback'],
  ['10.1.2.3', 'RFC 1918 10/8'],
  ['172.16.0.1', 'RFC 1918 172.16/12, first'],
  ['172.31.255.255', 'RFC 1918 172.16/12, last'],
  ['192.168.1.1', 'RFC 1918 192.168/16'],
  ['100.64.0.1', 'CGNAT'],
  ['169.254.169.254', 'cloud metadata'],
  ['0.0.0.0', 'unspecified'],
  ['0.1.2.3', '0/8'],
  ['192.0.0.170', '192.0.0.0/24'],
  ['198.18.0.1', 'benchmarking'],
  ['198.19.255.255', 'benchmarking, last'],
  ['224.0.0.1', 'multicast'],
  ['240.0.0.1', 'reserved'],
  ['255.255.255.255', 'broadcast'],
  ['::1', 'IPv6 loopback'],
  ['::', 'IPv6 unspecified'],
  ['fe80::1', 'IPv6 link-local'],
  ['fe80::1%eth0', 'IPv6 link-local with a zone id'],
  ['fd00:ec2::254', 'AWS metadata, unique-local'],
  ['fc00::1', 'unique-local'],
  ['ff02::1', 'IPv6 multicast'],
  ['::ffff:127.0.0.1', 'IPv4-mapped loopback'],
  ['::ffff:7f00:1', 'IPv4-mapped loopback, hex form'],
  ['::ffff:10.0.0.1', 'IPv4-mapped private'],
  ['::ffff:169.254.169.254', 'IPv4-mapped metadata'],
  ['64:ff9b::7f00:1', 'NAT64 loopback'],
  ['64:ff9b::a9fe:a9fe', 'NAT64 metadata'],
  ['2002:7f00:1::1', '6to4 loopback'],
  ['not-an-ip', 'not an address (fail closed)'],
];

describe('isForbiddenAddress', () => {
  it.each(allowed)('allows %s', (ip) => {
    expect(isForbiddenAddress(ip)).toBe(false);
  });
  it.each(forbidden)('forbids %s (%s)', (ip) => {
    expect(isForbiddenAddress(ip)).toBe(true);
  });
});

/** A fake resolver answering fixed addresses for every hostname. */
function resolvesTo(...addresses: string[]): Lookup {
  return async () => addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
}

const strict = { allowPrivate: false };

describe('checkReceiverUrl', () => {
  it.each([
    ['ftp://example.com/hook', /scheme ftp: is not allowed/],
    ['not a url', /not a valid/],
    ['https://user:secret@example.com/hook', /credentials/],
    ['http://127.0.0.1/', /127\.0\.0\.1 is a loopback\/private address/],
    ['http://[::1]:8080/', /::1 is a loopback\/private address/],
    ['http://2130706433/', /127\.0\.0\.1/], // WHATWG URL normalizes decimal IPv4 to 127.0.0.1
  ])('refuses %s', async (url, message) => {
    expect(await checkReceiverUrl(url, { ...strict, lookup: resolvesTo('93.184.216.34') })).toMatch(message);
  });

  it('refuses localhost through the real system resolver, naming the address and the override', async () => {
    const problem = await checkReceiverUrl('http://localhost/', strict);
    expect(problem).toMatch(/^url resolves to (127\.0\.0\.1|::1), a loopback\/private address; /);
    expect(problem).toContain('VIGIL_WEBHOOK_ALLOW_PRIVATE=1');
  });

  it('refuses a hostname when any of its addresses is private', async () => {
    const problem = await checkReceiverUrl('https://mixed.test/hook', { ...strict, lookup: resolvesTo('93.184.216.34', '10.0.0.7') });
    expect(problem).toMatch(/resolves to 10\.0\.0\.7/);
  });

  it('refuses a hostname that does not resolve', async () => {
    const notFound: Lookup = async () => {
      throw Object.assign(new Error('getaddrinfo ENOTFOUND'), { code: 'ENOTFOUND' });
    };
    expect(await checkReceiverUrl('https://nowhere.test/', { ...strict, lookup: notFound })).toBe('url host nowhere.test does not resolve (ENOTFOUND)');
    expect(await checkReceiverUrl('https://nowhere.test/', { ...strict, lookup: resolvesTo() })).toBe('url host nowhere.test does not resolve');
  });

  it('accepts a public IP literal without resolving', async () => {
    const never: Lookup = async () => {
      throw new Error('must not resolve an IP literal');
    };
    expect(await checkReceiverUrl('https://93.184.216.34/hook', { ...strict, lookup: never })).toBeNull();
    expect(await checkReceiverUrl('https://[2606:4700::1111]/hook', { ...strict, lookup: never })).toBeNull();
  });

  it('accepts a hostname whose addresses are all public', async () => {
    const lookup = resolvesTo('93.184.216.34', '2606:4700::1111');
    expect(await checkReceiverUrl('https://hooks.example.com/in?x=1', { ...strict, lookup })).toBeNull();
  });

  it('accepts loopback when private receivers are allowed', async () => {
    expect(await checkReceiverUrl('http://127.0.0.1:9000/', { allowPrivate: true })).toBeNull();
    expect(await checkReceiverUrl('http://[::1]:9000/', { allowPrivate: true })).toBeNull();
    expect(await checkReceiverUrl('http://localhost:9000/', { allowPrivate: true })).toBeNull();
  });
});
