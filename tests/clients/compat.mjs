// compat.mjs - the official `openai` and `ollama` npm packages, unmodified,
// against a real Sluice stack (started by tests/integration/test_stories.c):
// each scenario is an assertion; prints "ok"/"not ok" per scenario and exits
// 1 when any failed.  Environment: SLUICE_URL (https://127.0.0.1:PORT),
// SLUICE_KEY, SLUICE_KEY_LIMITED (a key whose tenant allows 1 request a
// minute), SLUICE_MODEL; NODE_EXTRA_CA_CERTS names the test's certificate.
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import assert from 'node:assert/strict';

const url = process.env.SLUICE_URL;
const key = process.env.SLUICE_KEY;
const model = process.env.SLUICE_MODEL;
const oa = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
const ol = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } });
let failed = 0;

async function scenario(name, fn) {
  try {
    await fn();
    console.log(`ok ${name}`);
  } catch (e) {
    failed++;
    console.log(`not ok ${name}: ${e && e.stack ? e.stack : e}`);
  }
}

async function rejects(p, cls, status) {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof cls, `expected ${cls.name}, found ${e && e.constructor && e.constructor.name}: ${e}`);
    if (status) assert.equal(e.status, status);
    return e;
  }
  assert.fail(`expected ${cls.name}, the call succeeded`);
}

await scenario('openai: models.list names the model', async () => {
  const ids = [];
  for await (const m of oa.models.list()) ids.push(m.id);
  assert.ok(ids.includes(model), `ids ${ids}`);
});
await scenario('openai: models.retrieve', async () => {
  const m = await oa.models.retrieve(model);
  assert.equal(m.id, model);
});
await scenario('openai: chat without max_tokens (as much as fits)', async () => {
  const r = await oa.chat.completions.create({
    model, temperature: 0, messages: [{ role: 'user', content: 'Once upon a time' }] });
  assert.match(r.choices[0].message.content, /little girl named Lily/);
  assert.ok(['stop', 'length'].includes(r.choices[0].finish_reason));
  assert.ok(r.usage.completion_tokens > 0);
});
await scenario('openai: streamed chat with usage', async () => {
  const s = await oa.chat.completions.create({
    model, temperature: 0, max_tokens: 24, stream: true, stream_options: { include_usage: true },
    messages: [{ role: 'user', content: 'Once upon a time' }] });
  let text = '', usage = null;
  for await (const c of s) {
    if (c.choices.length) text += c.choices[0].delta.content || '';
    if (c.usage) usage = c.usage;
  }
  assert.match(text, /Lily/);
  assert.equal(usage.completion_tokens, 24);
});
await scenario('openai: completions greedy', async () => {
  const r = await oa.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert.ok(r.choices[0].text.startsWith(', there was a little girl'), r.choices[0].text);
});
await scenario('openai: stop string', async () => {
  const r = await oa.completions.create({ model, prompt: 'Once upon a time', max_tokens: 60, temperature: 0, stop: ['.'] });
  assert.ok(!r.choices[0].text.includes('.'), r.choices[0].text);
  assert.equal(r.choices[0].finish_reason, 'stop');
});
await scenario('openai: seed replays', async () => {
  const req = { model, prompt: 'The little dog', max_tokens: 30, temperature: 1, seed: 42 };
  const a = await oa.completions.create(req), b = await oa.completions.create(req);
  assert.equal(a.choices[0].text, b.choices[0].text);
});
await scenario('openai: abort mid-stream', async () => {
  const ac = new AbortController();
  const s = await oa.chat.completions.create({
    model, max_tokens: 400, stream: true, messages: [{ role: 'user', content: 'Once upon a time' }] },
    { signal: ac.signal });
  let n = 0;
  try {
    for await (const c of s) { if (++n === 2) ac.abort(); void c; }
  } catch (e) {
    assert.ok(e.name === 'AbortError' || e instanceof OpenAI.APIUserAbortError, `${e}`);
  }
  assert.ok(n >= 2 && n < 400);
});
await scenario('openai: 401 is AuthenticationError', async () => {
  const bad = new OpenAI({ baseURL: `${url}/v1`, apiKey: 'slk_not-a-key', maxRetries: 0 });
  await rejects(bad.models.list(), OpenAI.AuthenticationError, 401);
});
await scenario('openai: unknown model is NotFoundError', async () => {
  const e = await rejects(oa.chat.completions.create({ model: 'nope', messages: [{ role: 'user', content: 'x' }] }),
    OpenAI.NotFoundError, 404);
  assert.equal(e.code, 'model_not_found');
});
await scenario('openai: bad parameter is BadRequestError naming it', async () => {
  const e = await rejects(oa.chat.completions.create({ model, temperature: 5, messages: [{ role: 'user', content: 'x' }] }),
    OpenAI.BadRequestError, 400);
  assert.equal(e.param, 'temperature');
});
await scenario('openai: quota is RateLimitError with Retry-After', async () => {
  const lim = new OpenAI({ baseURL: `${url}/v1`, apiKey: process.env.SLUICE_KEY_LIMITED, maxRetries: 0 });
  await lim.completions.create({ model, prompt: 'a', max_tokens: 1 });
  const e = await rejects(lim.completions.create({ model, prompt: 'a', max_tokens: 1 }), OpenAI.RateLimitError, 429);
  assert.ok(Number(e.headers.get ? e.headers.get('retry-after') : e.headers['retry-after']) >= 1);
});
await scenario('openai: two system messages and one after the first turn, top_p 0', async () => {
  const r = await oa.chat.completions.create({ model, top_p: 0, max_tokens: 8, messages: [
    { role: 'system', content: 'One.' }, { role: 'system', content: 'Two.' },
    { role: 'user', content: 'Once upon a time' }, { role: 'assistant', content: 'there was' },
    { role: 'system', content: 'Three.' }, { role: 'user', content: 'a dog' }] });
  assert.ok(r.choices[0].message.content.length > 0);
});
await scenario('openai: a tool message is a 400 naming the role', async () => {
  const e = await rejects(oa.chat.completions.create({ model, messages: [
    { role: 'user', content: 'x' }, { role: 'tool', tool_call_id: 'c1', content: '{}' }] }),
    OpenAI.BadRequestError, 400);
  assert.match(e.param || '', /messages\[1\]\.role/);
});
await scenario('openai: a prompt over the context is context_length_exceeded', async () => {
  const e = await rejects(oa.completions.create({ model, prompt: 'the dog ran. '.repeat(400), max_tokens: 4 }),
    OpenAI.BadRequestError, 400);
  assert.equal(e.code, 'context_length_exceeded');
});
await scenario('openai: empty stop string, one-string prompt array (LangChain)', async () => {
  const r = await oa.completions.create({ model, prompt: ['Once upon a time'], stop: [''], max_tokens: 6, temperature: 0 });
  assert.ok(r.choices[0].text.startsWith(', there was'), r.choices[0].text);
});
await scenario('openai: X-Request-Id on the answer', async () => {
  const { response } = await oa.models.list().withResponse();
  assert.match(response.headers.get('x-request-id') || '', /^[0-9a-f]+-[0-9]+$/);
});
await scenario('ollama: num_predict -1 (until the context is full)', async () => {
  const r = await ol.generate({ model, prompt: 'Once upon a time', options: { temperature: 0, num_predict: -1 } });
  assert.ok(r.eval_count > 0 && r.prompt_eval_count + r.eval_count <= 512, `${r.eval_count}`);
});
await scenario('ollama: list names model:latest', async () => {
  const r = await ol.list();
  assert.ok(r.models.some((m) => m.name === `${model}:latest`), JSON.stringify(r.models.map((m) => m.name)));
});
await scenario('ollama: generate', async () => {
  const r = await ol.generate({ model, prompt: 'Once upon a time', options: { temperature: 0, num_predict: 30 } });
  assert.match(r.response, /little girl named Lily/);
  assert.equal(r.done, true);
});
await scenario('ollama: streamed chat, name:latest', async () => {
  const s = await ol.chat({ model: `${model}:latest`, stream: true, options: { temperature: 0, num_predict: 30 },
    messages: [{ role: 'user', content: 'Once upon a time' }] });
  let text = '', done = false;
  for await (const p of s) { text += p.message.content; done = p.done; }
  assert.match(text, /Lily/);
  assert.ok(done);
});
await scenario('ollama: show', async () => {
  const r = await ol.show({ model });
  assert.ok(r.details && r.model_info, JSON.stringify(r).slice(0, 200));
});
await scenario('ollama: 401 is a ResponseError', async () => {
  const bad = new Ollama({ host: url, headers: { Authorization: 'Bearer slk_not-a-key' } });
  try {
    await bad.list();
    assert.fail('the call succeeded');
  } catch (e) {
    assert.equal(e.status_code, 401, `${e}`);
  }
});

console.log(failed ? `${failed} scenario(s) failed` : 'all scenarios passed');
process.exit(failed ? 1 : 0);
