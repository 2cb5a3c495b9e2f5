import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { FallbackModel } from '../../src/demo/fallback.js';
import type { ReplyInput, SuggestInput } from '../../src/demo/language-model.js';
import { LanguageModelError, OpenAiCompatibleModel } from '../../src/demo/openai-model.js';
import { TemplateModel } from '../../src/demo/template-model.js';
import { captureLogger, type LogLine } from '../support/logs.js';

/** A real loopback HTTP server standing in for an OpenAI-compatible endpoint. */
interface Stub {
  url: string;
  requests: { method: string; path: string; headers: IncomingMessage['headers']; body: any }[];
  close(): Promise<void>;
}

type Answer = (req: IncomingMessage, res: ServerResponse, body: any) => void;

const stubs: Stub[] = [];
afterEach(async () => {
  for (const s of stubs.splice(0)) await s.close();
});

async function stub(answer: Answer): Promise<Stub> {
  const requests: Stub['requests'] = [];
  const server: Server = createServer((req, res) => {
    let raw = '';
    req.on('data', (d: Buffer) => (raw += d.toString()));
    req.on('end', () => {
      const body = raw === '' ? undefined : JSON.parse(raw);
      requests.push({ method: req.method ?? '', path: req.url ?? '', headers: req.headers, body });
      answer(req, res, body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const s: Stub = {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`,
    requests,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
  stubs.push(s);
  return s;
}

const completion = (content: string): Answer => (_req, res) => {
  res.writeHead(200, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ id: 'cmpl-1', object: 'chat.completion', choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: 'stop' }] }));
};

const KEY = 'sk-test-key-do-not-log';
const replyInput: ReplyInput = {
  agent: {
    name: 'Claims Helper',
    description: 'Helps members with claims.',
    domain: 'insurance',
    risk_level: 'medium',
    persona: 'Friendly.',
    allowed_actions: ['explain coverage'],
    forbidden_actions: ['approve claims'],
  },
  history: [
    { role: 'user', content: 'hi' },
    { role: 'assistant', content: 'hello, how can I help?' },
  ],
  message: 'Is physiotherapy covered?',
  forbidden: null,
};
const suggestInput: SuggestInput = { name: 'Claims Helper', domain: 'insurance', risk_level: 'medium', context: 'dental' };

function model(url: string, timeoutMs = 2000): OpenAiCompatibleModel {
  return new OpenAiCompatibleModel({ url, model: 'tiny-chat', key: KEY, timeoutMs });
}

function withFallback(url: string, timeoutMs = 2000) {
  const logs: { level: string; msg: string; fields?: Record<string, unknown> }[] = [];
  const fallback = new FallbackModel(model(url, timeoutMs), new TemplateModel(), captureLogger(logs, { level: true }));
  return { fallback, logs };
}

describe('OpenAI-compatible provider against a stub endpoint', () => {
  it('POSTs {model, messages} to /chat/completions with the bearer key and returns the completion', async () => {
    const s = await stub(completion('  Yes, physiotherapy is covered with a referral.  '));
    const text = await model(s.url + '/').reply(replyInput);
    expect(text).toBe('Yes, physiotherapy is covered with a referral.');
    expect(s.requests).toHaveLength(1);
    const r = s.requests[0]!;
    expect(r.method).toBe('POST');
    expect(r.path).toBe('/v1/chat/completions');
    expect(r.headers.authorization).toBe(`Bearer ${KEY}`);
    expect(r.headers['content-type']).toBe('application/json');
    expect(Object.keys(r.body).sort()).toEqual(['messages', 'model']);
    expect(r.body.model).toBe('tiny-chat');
    const messages = r.body.messages as { role: string; content: string }[];
    expect(messages[0]!.role).toBe('system');
    expect(messages[0]!.content).toContain('You are Claims Helper');
    expect(messages[0]!.content).toContain('You must never: approve claims.');
    expect(messages.slice(1)).toEqual([...replyInput.history, { role: 'user', content: 'Is physiotherapy covered?' }]);
  });

  it('tells the model to decline when the message asks for a forbidden action', async () => {
    const s = await stub(completion('I cannot approve claims.'));
    await model(s.url).reply({ ...replyInput, message: 'approve my claim', forbidden: 'approve claims' });
    expect(s.requests[0]!.body.messages[0].content).toMatch(/asks you to approve claims, which is forbidden/);
  });

  it('parses a suggestion from JSON, even inside a code fence', async () => {
    const card = { description: 'Handles dental claims.', persona: 'Patient and clear.', allowed_actions: ['explain coverage'], forbidden_actions: ['approve claims'] };
    const s = await stub(completion('Here you go:\n```json\n' + JSON.stringify(card) + '\n```'));
    expect(await model(s.url).suggest(suggestInput)).toEqual(card);
    expect(s.requests[0]!.body.messages[1].content).toContain('Context: dental');
  });

  it('rejects with a coded LanguageModelError on 500, a non-completion, bad suggestion JSON and a timeout', async () => {
    const failing = await stub((_req, res) => {
      res.writeHead(500, { 'content-type': 'application/json' });
      res.end('{"error":"boom"}');
    });
    await expect(model(failing.url).reply(replyInput)).rejects.toMatchObject({ name: 'LanguageModelError', code: 'http_status' });
    const odd = await stub((_req, res) => res.end('{"choices":[]}'));
    await expect(model(odd.url).reply(replyInput)).rejects.toMatchObject({ code: 'bad_answer' });
    const prose = await stub(completion('Sure! It should describe claims.'));
    await expect(model(prose.url).suggest(suggestInput)).rejects.toMatchObject({ code: 'bad_answer' });
    const silent = await stub(() => {}); // never answers
    const started = Date.now();
    const error = await model(silent.url, 200).reply(replyInput).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LanguageModelError);
    expect(error).toMatchObject({ code: 'timeout', message: 'no answer within 200 ms' });
    expect(Date.now() - started).toBeLessThan(5000);
  });
});

describe('fallback to the built-in generator', () => {
  it('answers from the provider and names it when the provider works', async () => {
    const s = await stub(completion('From the model.'));
    const { fallback, logs } = withFallback(s.url);
    expect(await fallback.reply(replyInput)).toEqual({ value: 'From the model.', provider: 'openai-compatible', fallbackFrom: null });
    expect(logs).toEqual([]);
  });

  it('on a 500 answers with the built-in text and logs one warning without the key', async () => {
    const s = await stub((_req, res) => {
      res.writeHead(500);
      res.end(`internal error for key ${KEY}`);
    });
    const { fallback, logs } = withFallback(s.url);
    const out = await fallback.reply(replyInput);
    expect(out).toEqual({ value: await new TemplateModel().reply(replyInput), provider: 'builtin', fallbackFrom: 'openai-compatible' });
    expect(logs).toHaveLength(1);
    expect(logs[0]).toMatchObject({ level: 'warn', fields: { provider: 'openai-compatible', model: 'tiny-chat', operation: 'reply', code: 'http_status' } });
    expect(JSON.stringify(logs)).not.toContain(KEY);
  });

  it('on a timeout answers with the built-in suggestion', async () => {
    const s = await stub(() => {});
    const { fallback, logs } = withFallback(s.url, 150);
    const out = await fallback.suggest(suggestInput);
    expect(out).toEqual({ value: await new TemplateModel().suggest(suggestInput), provider: 'builtin', fallbackFrom: 'openai-compatible' });
    expect(logs[0]?.fields).toMatchObject({ operation: 'suggest', code: 'timeout' });
    expect(JSON.stringify(logs)).not.toContain(KEY);
  });

  it('on a refused connection answers with the built-in text', async () => {
    const s = await stub(completion('unused'));
    const url = s.url;
    await s.close();
    stubs.splice(stubs.indexOf(s), 1);
    const { fallback, logs } = withFallback(url);
    expect((await fallback.reply(replyInput)).provider).toBe('builtin');
    expect(logs[0]?.fields).toMatchObject({ code: 'transport' });
    expect(String(logs[0]?.fields?.error)).toMatch(/ECONNREFUSED|fetch failed/);
  });

  it('with the built-in model alone, never falls back', async () => {
    const builtin = new TemplateModel();
    const logs: LogLine[] = [];
    const fallback = new FallbackModel(builtin, builtin, captureLogger(logs));
    expect(await fallback.reply(replyInput)).toEqual({ value: await builtin.reply(replyInput), provider: 'builtin', fallbackFrom: null });
    expect(logs).toEqual([]);
  });
});
