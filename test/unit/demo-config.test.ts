import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { demoConfig } from '../../src/demo/config.js';

const KEY = 'sk-secret-value-123';
const ALL = { VIGIL_LLM_URL: 'https://llm.example/v1/', VIGIL_LLM_MODEL: 'small-1', VIGIL_LLM_KEY: KEY };

describe('demoConfig', () => {
  it('is null without any of the three variables (empty counts as unset)', () => {
    expect(demoConfig({})).toEqual({ llm: null });
    expect(demoConfig({ VIGIL_LLM_URL: '', VIGIL_LLM_MODEL: '', VIGIL_LLM_KEY: '', VIGIL_DEMO: '1' })).toEqual({ llm: null });
  });

  it('reads all three, with a 10 s timeout by default, and VIGIL_LLM_TIMEOUT_MS when set', () => {
    expect(demoConfig(ALL)).toEqual({ llm: { url: 'https://llm.example/v1', model: 'small-1', key: KEY, timeoutMs: 10_000 } });
    expect(demoConfig({ ...ALL, VIGIL_LLM_TIMEOUT_MS: '2500' }).llm?.timeoutMs).toBe(2500);
  });

  it('refuses one or two of the three, naming the missing ones and never the key', () => {
    for (const env of [{ VIGIL_LLM_KEY: KEY }, { VIGIL_LLM_URL: ALL.VIGIL_LLM_URL, VIGIL_LLM_KEY: KEY }]) {
      let thrown: unknown;
      try {
        demoConfig(env);
      } catch (e) {
        thrown = e;
      }
      expect(thrown).toBeInstanceOf(ConfigError);
      expect((thrown as Error).message).toMatch(/VIGIL_LLM_MODEL/);
      expect((thrown as Error).message).not.toContain(KEY);
    }
  });

  it('refuses a URL that is not http(s) and a timeout out of range', () => {
    expect(() => demoConfig({ ...ALL, VIGIL_LLM_URL: 'ftp://llm.example' })).toThrow(/VIGIL_LLM_URL/);
    expect(() => demoConfig({ ...ALL, VIGIL_LLM_URL: 'not a url' })).toThrow(/VIGIL_LLM_URL/);
    expect(() => demoConfig({ ...ALL, VIGIL_LLM_TIMEOUT_MS: '0' })).toThrow(/VIGIL_LLM_TIMEOUT_MS/);
  });
});
