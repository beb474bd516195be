// compat.mjs - the official `openai` and `ollama` npm packages,
// LangChain's ChatOpenAI, OpenAI and ChatOllama, and the Vercel AI SDK's
// generateText (its OpenAI-compatible provider), unmodified, against a real
// Sluice stack (started by tests/integration/test_stories.c): each scenario
// is an assertion; prints "ok"/"not ok" per scenario and exits 1 when any
// failed.  Environment: SLUICE_URL (https://127.0.0.1:PORT), SLUICE_KEY,
// SLUICE_KEY_LIMITED (a key whose tenant allows 1 request a minute),
// SLUICE_KEY_PACED (30 a minute: a refusal's Retry-After is at most 2 s),
// SLUICE_MODEL, SLUICE_MODEL_FILE (the GGUF file the worker serves);
// NODE_EXTRA_CA_CERTS names the test's certificate.  SLUICE_EMBED=1: the
// model embeds (tests/integration/test_embed_api.c): the "embed:" scenarios
// run, and only with it.
import OpenAI from 'openai';
import { Ollama } from 'ollama';
import { ChatOpenAI, OpenAI as LangChainOpenAI, OpenAIEmbeddings } from '@langchain/openai';
import { ChatOllama, OllamaEmbeddings } from '@langchain/ollama';
import { HumanMessage, SystemMessage } from '@langchain/core/messages';
import { generateText, jsonSchema, tool } from 'ai';
import { createOpenAICompatible } from '@ai-sdk/openai-compatible';
import assert from 'node:assert/strict';
import { statSync } from 'node:fs';

const url = process.env.SLUICE_URL;
const key = process.env.SLUICE_KEY;
const model = process.env.SLUICE_MODEL;
const oa = new OpenAI({ baseURL: `${url}/v1`, apiKey: key, maxRetries: 0 });
const ol = new Ollama({ host: url, headers: { Authorization: `Bearer ${key}` } });
let failed = 0;

// SLUICE_ONLY: run only the scenarios whose name contains one of its
// comma-separated parts (the random-weight run of
// tests/integration/test_structured.c: "structured"; test_tools.c: "tools:";
// test_thinking.c: "tools:,thinking:").
const only = process.env.SLUICE_ONLY ? process.env.SLUICE_ONLY.split(',') : null;
// SLUICE_SKIP: leave out the scenarios whose name contains one of its
// comma-separated parts (the tool scenarios need more context than the
// shipped model's 512: test_tools.c runs them on a worker serving 2048;
// the thinking scenarios a thinking model: test_thinking.c)
const skip = process.env.SLUICE_SKIP ? process.env.SLUICE_SKIP.split(',') : null;
async function scenario(name, fn) {
  if (only && !only.some((o) => name.includes(o))) return;
  if (skip && skip.some((o) => name.includes(o))) return;
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
// what the lists say comes from the model file the worker serves
const file = process.env.SLUICE_MODEL_FILE ? statSync(process.env.SLUICE_MODEL_FILE) : null;
await scenario('openai: models.retrieve, created is the model file\'s time', async () => {
  const m = await oa.models.retrieve(model);
  assert.equal(m.id, model);
  assert.equal(m.created, Math.floor(file.mtimeMs / 1000));
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
await scenario('openai: a 429 is retried after its Retry-After, then answered', async () => {
  // what went over the wire: the SDK's own retry loop, observed through its
  // documented `fetch` option
  const wire = [];
  const paced = new OpenAI({
    baseURL: `${url}/v1`, apiKey: process.env.SLUICE_KEY_PACED, maxRetries: 2,
    fetch: async (u, init) => {
      wire.push({ at: Date.now(), what: 'request' });
      const r = await fetch(u, init);
      wire.push({ at: Date.now(), what: r.status, retryAfter: r.headers.get('retry-after') });
      return r;
    },
  });
  // 30 a minute from idle: a burst of 30, then each call waits for the next
  // slot (<= 2 s); call until one call saw a 429 and still succeeded
  let seen = -1;
  for (let i = 0; i < 100 && seen < 0; i++) {
    const from = wire.length;
    const r = await paced.completions.create({ model, prompt: 'a', max_tokens: 1 });
    assert.equal(r.object, 'text_completion');
    const mine = wire.slice(from);
    const k = mine.findIndex((w) => w.what === 429);
    if (k >= 0) seen = from + k;
  }
  assert.ok(seen >= 0, 'no call was refused within 100 calls of a 30-a-minute key');
  const refusal = wire[seen], retry = wire[seen + 1], answer = wire[seen + 2];
  const ra = Number(refusal.retryAfter);
  assert.ok(ra >= 1 && ra <= 2, `Retry-After ${refusal.retryAfter}`);
  assert.equal(retry.what, 'request');
  assert.ok(retry.at - refusal.at >= ra * 1000 - 50, `retried after ${retry.at - refusal.at} ms, Retry-After ${ra} s`);
  assert.equal(answer.what, 200);
});
await scenario('openai: two system messages and one after the first turn, top_p 0', async () => {
  const r = await oa.chat.completions.create({ model, top_p: 0, max_tokens: 8, messages: [
    { role: 'system', content: 'One.' }, { role: 'system', content: 'Two.' },
    { role: 'user', content: 'Once upon a time' }, { role: 'assistant', content: 'there was' },
    { role: 'system', content: 'Three.' }, { role: 'user', content: 'a dog' }] });
  assert.ok(r.choices[0].message.content.length > 0);
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
const lcOpenAI = { apiKey: key, configuration: { baseURL: `${url}/v1` }, maxRetries: 0 };
await scenario('langchain: ChatOpenAI invoke with a system message, no max tokens', async () => {
  const llm = new ChatOpenAI({ model, temperature: 0, ...lcOpenAI });
  const r = await llm.invoke([new SystemMessage('You tell stories.'), new HumanMessage('Once upon a time')]);
  assert.ok(typeof r.content === 'string' && r.content.length > 0, JSON.stringify(r.content));
  assert.ok(r.usage_metadata && r.usage_metadata.output_tokens > 0, JSON.stringify(r.usage_metadata));
});
await scenario('langchain: ChatOpenAI stream', async () => {
  const llm = new ChatOpenAI({ model, temperature: 0, maxTokens: 24, ...lcOpenAI });
  let text = '', n = 0;
  for await (const c of await llm.stream('Once upon a time')) {
    text += c.content;
    n++;
  }
  assert.ok(n > 2 && text.length > 0, `${n} chunks: ${text}`);
});
await scenario('langchain: ChatOpenAI stop and a refusal as an error', async () => {
  const llm = new ChatOpenAI({ model, temperature: 0, maxTokens: 40, ...lcOpenAI });
  const r = await llm.invoke('Once upon a time', { stop: ['.'] });
  assert.ok(!r.content.includes('.'), r.content);
  const bad = new ChatOpenAI({ model: 'no-such-model', ...lcOpenAI });
  await assert.rejects(bad.invoke('x'), (e) => e.status === 404 || /404|model/.test(String(e)));
});
await scenario('langchain: OpenAI (completions) greedy equals the SDK', async () => {
  const llm = new LangChainOpenAI({ model, temperature: 0, maxTokens: 12, ...lcOpenAI });
  const text = await llm.invoke('Once upon a time');
  const ref = await oa.completions.create({ model, prompt: 'Once upon a time', max_tokens: 12, temperature: 0 });
  assert.equal(text, ref.choices[0].text);
});
await scenario('langchain: ChatOllama invoke and stream', async () => {
  const llm = new ChatOllama({ model, baseUrl: url, temperature: 0, numPredict: 16,
    headers: { Authorization: `Bearer ${key}` } });
  const r = await llm.invoke([new HumanMessage('Once upon a time')]);
  assert.ok(typeof r.content === 'string' && r.content.length > 0, JSON.stringify(r.content));
  let text = '';
  for await (const c of await llm.stream('Once upon a time')) text += c.content;
  assert.equal(text, r.content);
});
await scenario('ollama: num_predict -1 (until the context is full)', async () => {
  const r = await ol.generate({ model, prompt: 'Once upon a time', options: { temperature: 0, num_predict: -1 } });
  assert.ok(r.eval_count > 0 && r.prompt_eval_count + r.eval_count <= 512, `${r.eval_count}`);
});
await scenario('ollama: list names model:latest with the file\'s size, time and details', async () => {
  const r = await ol.list();
  const m = r.models.find((x) => x.name === `${model}:latest`);
  assert.ok(m, JSON.stringify(r.models.map((x) => x.name)));
  assert.equal(m.size, file.size);
  assert.equal(new Date(m.modified_at).getTime(), Math.floor(file.mtimeMs / 1000) * 1000);
  assert.equal(m.details.family, 'llama');
  assert.equal(m.details.quantization_level, 'F32');
  assert.match(m.details.parameter_size, /^[0-9]+\.[0-9]K$/);
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
  assert.equal(r.model_info['general.architecture'], 'llama');
  assert.ok(r.model_info['general.parameter_count'] > 200000, JSON.stringify(r.model_info));
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

// ---- structured outputs and logprobs -------------------------------------
const person = {
  type: 'object',
  properties: { name: { type: 'string', maxLength: 12 }, age: { type: 'integer', minimum: 0, maximum: 99 } },
  required: ['name', 'age'], additionalProperties: false,
};
// JSON bounds no exponent: a random model may write 5E999, which JSON.parse
// reads as Infinity (valid JSON, not a finite number)
function checkPerson(text) {
  const v = JSON.parse(text);
  assert.deepEqual(Object.keys(v).sort(), ['age', 'name']);
  assert.equal(typeof v.name, 'string');
  assert.ok([...v.name].length <= 12, `name ${v.name}`);
  assert.ok(Number.isInteger(v.age) && v.age >= 0 && v.age <= 99, `age ${v.age}`);
}
const personFormat = { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } };
await scenario('structured: openai json_schema strict, greedy and seeded', async () => {
  for (const [temperature, seed] of [[0, 1], [0.9, 2], [0.9, 3]]) {
    const r = await oa.chat.completions.create({ model, temperature, seed, max_tokens: 400,
      messages: [{ role: 'user', content: 'Once upon a time' }], response_format: personFormat });
    assert.equal(r.choices[0].finish_reason, 'stop');
    checkPerson(r.choices[0].message.content);
  }
});
await scenario('structured: openai json_object', async () => {
  const r = await oa.chat.completions.create({ model, temperature: 0.8, seed: 5, max_tokens: 400,
    messages: [{ role: 'user', content: 'Once upon a time' }], response_format: { type: 'json_object' } });
  if (r.choices[0].finish_reason === 'stop')
    assert.equal(typeof JSON.parse(r.choices[0].message.content), 'object');
  else
    assert.ok(r.choices[0].message.content.trimStart().startsWith('{'));
});
await scenario('structured: openai streamed json_schema', async () => {
  const s = await oa.chat.completions.create({ model, temperature: 0.9, seed: 8, max_tokens: 400, stream: true,
    messages: [{ role: 'user', content: 'Tell me' }], response_format: personFormat });
  let text = '', finish = null;
  for await (const c of s) {
    text += c.choices[0]?.delta?.content ?? '';
    finish = c.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(finish, 'stop');
  checkPerson(text);
});
await scenario('structured: openai unsupported keyword is a BadRequestError naming the field', async () => {
  const e = await rejects(oa.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' }],
    response_format: { type: 'json_schema', json_schema: { name: 'n', schema: { not: { maxLength: 3 } } } } }),
  OpenAI.BadRequestError, 400);
  assert.equal(e.param, 'response_format.json_schema.schema');
  assert.match(e.message, /not/);
});
await scenario('structured: openai logprobs and top_logprobs', async () => {
  const r = await oa.chat.completions.create({ model, temperature: 0, max_tokens: 8, logprobs: true, top_logprobs: 3,
    messages: [{ role: 'user', content: 'Once upon a time' }] });
  const c = r.choices[0].logprobs.content;
  assert.equal(c.length, r.usage.completion_tokens);
  for (const e of c) {
    assert.ok(e.logprob <= 0 && e.top_logprobs.length >= 1 && e.top_logprobs.length <= 3);
    assert.deepEqual(e.top_logprobs[0].bytes, e.bytes); // greedy: the best one
  }
});
await scenario('structured: openai n choices, each its own seed, streamed by index', async () => {
  const messages = [{ role: 'user', content: 'Once upon a time there was a little girl named Lily who loved to play' }];
  const solo = [];
  for (const seed of [20, 21, 22]) {
    const r = await oa.chat.completions.create({ model, temperature: 1, seed, max_tokens: 12, messages });
    solo.push(r.choices[0].message.content);
  }
  const r = await oa.chat.completions.create({ model, temperature: 1, seed: 20, max_tokens: 12, n: 3, messages,
    logprobs: true });
  assert.deepEqual(r.choices.map((c) => c.index), [0, 1, 2]);
  assert.deepEqual(r.choices.map((c) => c.message.content), solo);
  assert.equal(r.usage.completion_tokens, r.choices.reduce((a, c) => a + c.logprobs.content.length, 0));
  const s = await oa.chat.completions.create({ model, temperature: 1, seed: 20, max_tokens: 12, n: 3, messages,
    stream: true, stream_options: { include_usage: true } });
  const text = ['', '', ''], finish = [null, null, null];
  let usage = null;
  for await (const c of s) {
    if (c.usage) usage = c.usage;
    for (const ch of c.choices) {
      text[ch.index] += ch.delta?.content ?? '';
      finish[ch.index] = ch.finish_reason ?? finish[ch.index];
    }
  }
  assert.deepEqual(text, solo);
  assert.ok(finish.every((f) => f === 'stop' || f === 'length'), `${finish}`);
  assert.equal(usage.prompt_tokens, r.usage.prompt_tokens);
  const e = await rejects(oa.completions.create({ model, prompt: 'x', best_of: 2 }), OpenAI.BadRequestError, 400);
  assert.equal(e.param, 'best_of');
});
await scenario('structured: ollama format json and a schema', async () => {
  const g = await ol.generate({ model, prompt: 'Once upon a time', format: 'json',
    options: { temperature: 0, num_predict: 400 } });
  if (g.done_reason === 'stop') assert.equal(typeof JSON.parse(g.response), 'object');
  const c = await ol.chat({ model, format: person, messages: [{ role: 'user', content: 'Who?' }],
    options: { temperature: 0.8, seed: 11, num_predict: 400 } });
  assert.equal(c.done_reason, 'stop');
  checkPerson(c.message.content);
});
await scenario('structured: ollama contradictory schema is a 400 ResponseError', async () => {
  try {
    await ol.generate({ model, prompt: 'x', format: { type: 'integer', minimum: 5, maximum: 1 } });
    assert.fail('accepted');
  } catch (e) {
    assert.equal(e.status_code, 400);
    assert.match(e.error ?? e.message, /unsatisfiable/);
  }
});
await scenario('structured: ollama logprobs', async () => {
  const r = await ol.generate({ model, prompt: 'Once', logprobs: true, top_logprobs: 2,
    options: { temperature: 0, num_predict: 5 } });
  assert.equal(r.logprobs.length, r.eval_count);
  for (const e of r.logprobs) assert.ok(e.top_logprobs.length >= 1 && e.top_logprobs.length <= 2);
});

// ---- tool calling (docs/tools.md) -----------------------------------------
// a forced call (tool_choice required or named) is guaranteed whatever the
// weights: the worker constrains it to the tools' schemas
const weather = {
  type: 'function',
  function: {
    name: 'get_weather', description: 'Weather of a city',
    parameters: {
      type: 'object', additionalProperties: false, required: ['city', 'days'],
      properties: { city: { type: 'string', maxLength: 12 }, days: { type: 'integer', minimum: 1, maximum: 7 } },
    },
  },
};
function checkWeather(args) {
  assert.deepEqual(Object.keys(args).sort(), ['city', 'days']);
  assert.equal(typeof args.city, 'string');
  assert.ok(Number.isInteger(args.days) && args.days >= 1 && args.days <= 7, `days ${args.days}`);
}
await scenario('tools: openai tool loop (required call, tool result, final answer)', async () => {
  const messages = [{ role: 'user', content: 'What is the weather in Paris?' }];
  const r = await oa.chat.completions.create({ model, temperature: 0.8, seed: 1, max_tokens: 200,
    messages, tools: [weather], tool_choice: 'required', parallel_tool_calls: false });
  const c = r.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.tool_calls.length, 1);
  const call = c.message.tool_calls[0];
  assert.equal(call.type, 'function');
  assert.equal(call.function.name, 'get_weather');
  checkWeather(JSON.parse(call.function.arguments));
  messages.push(c.message);
  messages.push({ role: 'tool', tool_call_id: call.id, content: 'sunny, 21 C' });
  const r2 = await oa.chat.completions.create({ model, temperature: 0, max_tokens: 16, messages,
    tools: [weather], tool_choice: 'none' });
  assert.equal(typeof r2.choices[0].message.content, 'string');
  assert.ok(['stop', 'length'].includes(r2.choices[0].finish_reason));
});
await scenario('tools: openai streamed tool-call deltas accumulate (chat.completions.stream)', async () => {
  // parallel calls allowed (the default): room for the most a forced answer may hold
  const s = oa.chat.completions.stream({ model, temperature: 0.8, seed: 2, max_tokens: 800, stream: true,
    messages: [{ role: 'user', content: 'Weather?' }], tools: [weather],
    tool_choice: { type: 'function', function: { name: 'get_weather' } } });
  const done = await s.finalChatCompletion();
  const c = done.choices[0];
  assert.equal(c.finish_reason, 'tool_calls');
  assert.equal(c.message.tool_calls[0].function.name, 'get_weather');
  checkWeather(JSON.parse(c.message.tool_calls[0].function.arguments));
  assert.ok(c.message.tool_calls[0].id.startsWith('call_'));
});
await scenario('tools: openai refuses a tool message without a matching call', async () => {
  const e = await rejects(oa.chat.completions.create({ model, messages: [{ role: 'user', content: 'x' },
    { role: 'tool', tool_call_id: 'call_nope', content: 'r' }] }), OpenAI.BadRequestError, 400);
  assert.equal(e.param, 'messages[1].tool_call_id');
});
await scenario('tools: langchain bindTools with tool_choice', async () => {
  const llm = new ChatOpenAI({ model, temperature: 0.8, maxTokens: 800, ...lcOpenAI });
  const r = await llm.bindTools([weather], { tool_choice: 'get_weather' }).invoke('Weather in Rome?');
  assert.ok(r.tool_calls.length >= 1, JSON.stringify({ content: r.content, meta: r.response_metadata,
    invalid: r.invalid_tool_calls }));
  for (const c of r.tool_calls) assert.equal(c.name, 'get_weather');
  checkWeather(r.tool_calls[0].args);
});
await scenario('tools: langchain withStructuredOutput in tool mode (functionCalling)', async () => {
  const llm = new ChatOpenAI({ model, temperature: 0.8, maxTokens: 800, ...lcOpenAI });
  const structured = llm.withStructuredOutput(weather.function.parameters,
    { name: 'get_weather', method: 'functionCalling' });
  checkWeather(await structured.invoke('Weather in Rome?'));
});
await scenario('tools: Vercel AI SDK generateText with tools (toolChoice required)', async () => {
  const sluice = createOpenAICompatible({ name: 'sluice', baseURL: `${url}/v1`, apiKey: key });
  const r = await generateText({
    model: sluice(model), prompt: 'What is the weather in Oslo?', temperature: 0.8, seed: 6,
    maxOutputTokens: 800, maxRetries: 0, toolChoice: 'required',
    tools: { get_weather: tool({ description: 'Weather of a city', inputSchema: jsonSchema(weather.function.parameters) }) },
  });
  assert.ok(r.toolCalls.length >= 1, JSON.stringify(r.content));
  for (const c of r.toolCalls) {
    assert.equal(c.toolName, 'get_weather');
    checkWeather(c.input);
  }
  assert.equal(r.finishReason, 'tool-calls');
});
await scenario('tools: ollama chat with tools (tool_choice, a Sluice extension, forces the call)', async () => {
  const r = await ol.chat({ model, messages: [{ role: 'user', content: 'Weather?' }], tools: [weather],
    tool_choice: 'required', options: { temperature: 0.8, seed: 3, num_predict: 800 } });
  assert.ok(r.message.tool_calls.length >= 1);
  assert.equal(r.message.tool_calls[0].function.name, 'get_weather');
  checkWeather(r.message.tool_calls[0].function.arguments);
  const r2 = await ol.chat({ model, tools: [weather], options: { temperature: 0, num_predict: 12 },
    messages: [{ role: 'user', content: 'Weather?' }, r.message, { role: 'tool', content: 'sunny' }] });
  assert.equal(r2.done, true);
});

// Thinking (tests/integration/test_thinking.c: a model whose template opens
// <think>, a thinking budget in the gateway's limits): reasoning apart from
// the content, as vLLM and llama.cpp (reasoning_content) and Ollama
// (think, message.thinking) send it.
function noTags(s) {
  assert.equal(typeof s, 'string');
  assert.ok(!s.includes('<think>') && !s.includes('</think>'), s);
}
await scenario('thinking: openai streamed reasoning_content comes before and apart from content', async () => {
  const s = await oa.chat.completions.create({ model, temperature: 0.9, seed: 4, max_tokens: 48, stream: true,
    messages: [{ role: 'user', content: 'Think, then answer.' }] });
  let reasoning = '', content = '';
  for await (const ch of s) {
    const d = ch.choices[0]?.delta ?? {};
    if (d.reasoning_content) {
      assert.equal(content, '', 'reasoning after content');
      reasoning += d.reasoning_content;
    }
    if (d.content) content += d.content;
  }
  assert.ok(reasoning.length > 0 && content.length > 0, `reasoning [${reasoning}] content [${content}]`);
  noTags(reasoning);
  noTags(content);
});
await scenario('thinking: openai json_schema with thinking on is JSON in the content', async () => {
  const r = await oa.chat.completions.create({ model, temperature: 0.9, seed: 1, max_tokens: 120,
    messages: [{ role: 'user', content: 'A person, as JSON.' }], chat_template_kwargs: { enable_thinking: true },
    response_format: { type: 'json_schema', json_schema: { name: 'person', strict: true, schema: person } } });
  const m = r.choices[0].message;
  assert.ok(m.reasoning_content.length > 0);
  checkPerson(m.content);
  assert.ok(r.usage.completion_tokens_details.reasoning_tokens > 0);
});
await scenario('thinking: ollama-js chat think true streams message.thinking apart', async () => {
  const s = await ol.chat({ model, think: true, stream: true, options: { temperature: 0.9, seed: 5, num_predict: 48 },
    messages: [{ role: 'user', content: 'Think, then answer.' }] });
  let thinking = '', content = '';
  for await (const ch of s) {
    if (ch.message.thinking) {
      assert.equal(content, '', 'thinking after content');
      thinking += ch.message.thinking;
    }
    content += ch.message.content;
  }
  assert.ok(thinking.length > 0 && content.length > 0, `thinking [${thinking}] content [${content}]`);
  noTags(thinking);
  noTags(content);
});
await scenario('thinking: ollama-js think false answers without thinking', async () => {
  const r = await ol.chat({ model, think: false, options: { temperature: 0, num_predict: 8 },
    messages: [{ role: 'user', content: 'Answer.' }] });
  assert.ok(!r.message.thinking, `thinking [${r.message.thinking}]`);
  assert.equal(typeof r.message.content, 'string');
});

// ---- embeddings (SLUICE_EMBED: the model is an embedding model) ----------
const norm = (v) => Math.sqrt(v.reduce((s, x) => s + x * x, 0));
const same = (a, b) => a.length === b.length && a.every((x, i) => Math.fround(x) === Math.fround(b[i]));
if (process.env.SLUICE_EMBED) {
  let ref = null;
  await scenario('embed: openai embeddings.create, a string (its default base64)', async () => {
    const r = await oa.embeddings.create({ model, input: 'hello world' });
    assert.equal(r.data.length, 1);
    ref = r.data[0].embedding;
    assert.ok(Array.isArray(ref) && ref.length >= 16, `${typeof ref} ${ref && ref.length}`);
    assert.ok(Math.abs(norm(ref) - 1) < 1e-5, `norm ${norm(ref)}`);
    assert.ok(r.usage.prompt_tokens >= 4, JSON.stringify(r.usage));
  });
  await scenario('embed: openai batch, float and base64 the same vectors', async () => {
    const f = await oa.embeddings.create({ model, input: ['x', 'hello world'], encoding_format: 'float' });
    assert.equal(f.data.length, 2);
    assert.deepEqual(f.data.map((d) => d.index), [0, 1]);
    assert.ok(same(f.data[1].embedding, ref), 'float differs from base64');
    const t = await oa.embeddings.create({ model, input: [[2, 40, 41, 3]] });
    assert.equal(t.usage.prompt_tokens, 4);
  });
  await scenario('embed: openai bad input is a BadRequestError', async () => {
    await rejects(oa.embeddings.create({ model, input: [] }), OpenAI.BadRequestError, 400);
    await rejects(oa.embeddings.create({ model: 'no-such-model', input: 'x' }), OpenAI.NotFoundError, 404);
  });
  await scenario('embed: ollama embed and the legacy embeddings', async () => {
    const r = await ol.embed({ model, input: ['x', 'hello world'] });
    assert.equal(r.embeddings.length, 2);
    assert.ok(same(r.embeddings[1], ref));
    assert.ok(r.prompt_eval_count > 0);
    const l = await ol.embeddings({ model, prompt: 'hello world' });
    assert.ok(same(l.embedding, ref));
    await assert.rejects(ol.embed({ model, input: 'x', dimensions: 3 }), (e) => e.status_code === 400);
  });
  await scenario('embed: langchain OpenAIEmbeddings', async () => {
    const e = new OpenAIEmbeddings({ model, ...lcOpenAI });
    const q = await e.embedQuery('hello world');
    assert.ok(same(q, ref));
    const d = await e.embedDocuments(['a document', 'hello world']);
    assert.equal(d.length, 2);
    assert.ok(same(d[1], ref));
  });
  await scenario('embed: langchain OllamaEmbeddings', async () => {
    const e = new OllamaEmbeddings({ model, baseUrl: url, headers: { Authorization: `Bearer ${key}` } });
    const d = await e.embedDocuments(['a document', 'hello world']);
    assert.equal(d.length, 2);
    assert.ok(same(d[1], ref));
    assert.ok(same(await e.embedQuery('hello world'), ref));
  });
}

console.log(failed ? `${failed} scenario(s) failed` : 'all scenarios passed');
process.exit(failed ? 1 : 0);
