import { describe, expect, it } from 'vitest';
import { trusted } from '../../src/client/owner-finder.js';

describe('which owner URLs a client sends its key to', () => {
  it('never from https down to http', () => {
    expect(trusted('https://b.example', 'https://a.example')).toBe(true);
    expect(trusted('http://b.example', 'https://a.example')).toBe(false);
    expect(trusted('http://b.example', 'http://a.example')).toBe(true);
  });

  it('never to a loopback or unspecified host unless the configured URL is one', () => {
    for (const host of ['127.0.0.1:8080', 'localhost:8080', '0.0.0.0:8080', '[::1]:8080', '[::]:8080']) {
      expect(trusted(`http://${host}`, 'http://vigil.internal')).toBe(false);
      expect(trusted(`http://${host}`, 'http://127.0.0.1:9000')).toBe(true);
    }
    expect(trusted('http://127.0.0.2:8080', 'http://127.0.0.1:9000')).toBe(true);
  });

  it('refuses what is not an http(s) URL', () => {
    expect(trusted('ftp://b.example', 'http://a.example')).toBe(false);
    expect(trusted('not a url', 'http://a.example')).toBe(false);
  });
});
