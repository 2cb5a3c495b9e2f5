import { describe, expect, it } from 'vitest';
import { parseTargets } from '../../bench/targets.js';

describe('npm run bench -- --targets', () => {
  it('reads comma-separated base URLs, in either option form, without trailing slashes', () => {
    expect(parseTargets(['--quick'])).toBeNull();
    expect(parseTargets(['--targets', 'http://vigil-1:8080,http://vigil-2:8080/', '--quick'])).toEqual(['http://vigil-1:8080', 'http://vigil-2:8080']);
    expect(parseTargets(['--targets=https://vigil.example/api/'])).toEqual(['https://vigil.example/api']);
  });

  it('refuses a missing value, a non-http URL, a query or credentials, and a URL named twice', () => {
    expect(() => parseTargets(['--targets'])).toThrow(/needs comma-separated base URLs/);
    expect(() => parseTargets(['--targets', '--quick'])).toThrow(/needs comma-separated base URLs/);
    expect(() => parseTargets(['--targets', 'vigil-1:8080'])).toThrow(/not an http\(s\) base URL: vigil-1:8080/);
    expect(() => parseTargets(['--targets', 'ftp://vigil-1'])).toThrow(/not an http\(s\) base URL/);
    expect(() => parseTargets(['--targets', 'http://a:1/?x=1'])).toThrow(/not an http\(s\) base URL/);
    expect(() => parseTargets(['--targets', 'http://u:p@a:1'])).toThrow(/not an http\(s\) base URL/);
    expect(() => parseTargets(['--targets', 'http://a:1,http://a:1/'])).toThrow(/names a URL twice/);
  });
});
