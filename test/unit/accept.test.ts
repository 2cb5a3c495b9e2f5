import { describe, expect, it } from 'vitest';
import { acceptQuality, prefersGzip } from '../../src/http/accept.js';

describe('Accept negotiation', () => {
  it('takes the quality of the most specific matching range', () => {
    expect(acceptQuality(undefined, 'application/gzip')).toBe(1);
    expect(acceptQuality('application/gzip;q=0', 'application/gzip')).toBe(0);
    expect(acceptQuality('*/*;q=0.2, application/*;q=0.5, application/gzip;q=0.7', 'application/gzip')).toBe(0.7);
    expect(acceptQuality('*/*;q=0.2, application/*;q=0.5', 'application/json')).toBe(0.5);
    expect(acceptQuality('text/html', 'application/json')).toBe(0);
    expect(acceptQuality('application/gzip;q=bad', 'application/gzip')).toBe(0);
  });

  it('selects gzip only when named with q > 0 and not ranked below JSON', () => {
    expect(prefersGzip('application/gzip')).toBe(true);
    expect(prefersGzip('Application/GZIP ; Q=0.8')).toBe(true);
    expect(prefersGzip('application/json;q=0.5, application/gzip')).toBe(true);
    expect(prefersGzip('application/gzip, */*')).toBe(true);
    expect(prefersGzip('application/gzip;q=0')).toBe(false);
    expect(prefersGzip('application/gzip;q=0.000')).toBe(false);
    expect(prefersGzip('application/gzip;q=0.5, application/json')).toBe(false);
    expect(prefersGzip('*/*')).toBe(false);
    expect(prefersGzip('application/*')).toBe(false);
    expect(prefersGzip(undefined)).toBe(false);
    expect(prefersGzip('')).toBe(false);
  });
});
