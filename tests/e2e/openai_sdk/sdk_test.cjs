// The official `openai` Node SDK against two `pagoda serve` processes (started by
// openai_sdk_e2e_test.py, which says what each is configured with).
// Usage: node sdk_test.cjs SDK_DIR BASE_URL API_KEY REFERENCE_JSON TINY_BASE_URL
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');
const net = require('node:net');

const [sdkDir, baseURL, apiKey, referencePath, tinyURL] = process.argv.slice(2);
const sdk = require(sdkDir);
const OpenAI = sdk.default ?? sdk;
const model = 'aidreams';
const client = new OpenAI({baseURL, apiKey, maxRetries: 0, timeout: 60000});
const tiny = new OpenAI({baseURL: tinyURL, apiKey, maxRetries: 0, timeout: 60000});
const tinyRoot = tinyURL.replace(/\/v1$/, '');
const longBody = {prompt: 'Once upon a time', max_tokens: 1000, ignore_eos: true};
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

// One sample of the tiny server's /metrics (pagoda: names, model_name label).
async function metric(name) {
  const text = await (await fetch(`${tinyRoot}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`));
  assert.ok(line, `${name} not in /metrics`);
  return Number(line.split(' ').pop());
}

const tokenIds = (tokens) => tokens.map((t) => Number(t.slice('token_id:'.length)));

async function expectError(promise, cls, status, pattern) {
  await assert.rejects(promise, (e) => {
    assert.ok(e instanceof cls, `${e.constructor.name}: ${e.message}`);
    assert.equal(e.status, status);
    assert.match(e.message, pattern);
    return true;
  });
}

async function models() {
  const ids = [];
  for await (const m of client.models.list()) ids.push(m.id);
  assert.deepEqual(ids, [model]);
  assert.equal((await client.models.retrieve(model)).id, model);
}

// Greedy completions of the reference prompts equal the reference tokens, whole and streamed.
async function referenceCompletions() {
  const ref = JSON.parse(fs.readFileSync(referencePath, 'utf8'));
  for (const c of ref.cases) {
    const expected = c.greedy_tokens.slice(0, ref.config.seq_len - c.prompt_tokens.length);
    const body = {model, prompt: c.prompt_tokens, max_tokens: c.greedy_tokens.length,
                  temperature: 0, logprobs: 0, stop_token_ids: [1],
                  return_tokens_as_token_ids: true};
    const r = await client.completions.create(body);
    assert.deepEqual(tokenIds(r.choices[0].logprobs.tokens), expected, c.prompt);
    assert.equal(r.choices[0].finish_reason, 'length');
    assert.equal(r.usage.completion_tokens, expected.length);
    const stream = await client.completions.create(
        {...body, stream: true, stream_options: {include_usage: true}});
    let tokens = [], text = '', usage = null;
    for await (const chunk of stream) {
      if (chunk.usage) usage = chunk.usage;
      for (const choice of chunk.choices) {
        text += choice.text;
        if (choice.logprobs) tokens = tokens.concat(tokenIds(choice.logprobs.tokens));
      }
    }
    assert.deepEqual(tokens, expected);
    assert.equal(text, r.choices[0].text);
    for (const k of ['prompt_tokens', 'completion_tokens', 'total_tokens']) {
      assert.equal(usage[k], r.usage[k], k);  // cached_tokens may differ: the prefix cache
    }
  }
}

async function chat() {
  const body = {model, messages: [{role: 'system', content: 'Be brief.'},
                                  {role: 'user', content: 'Echoes'}],
                max_completion_tokens: 8, temperature: 0};
  const whole = await client.chat.completions.create(body);
  assert.equal(whole.object, 'chat.completion');
  assert.equal(whole.choices[0].message.role, 'assistant');
  assert.equal(whole.usage.completion_tokens, 8);
  const stream = await client.chat.completions.create({...body, stream: true});
  let text = '', finish = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta?.content ?? '';
    finish = chunk.choices[0]?.finish_reason ?? finish;
  }
  assert.equal(text, whole.choices[0].message.content);
  assert.equal(finish, 'length');
}

async function errors() {
  await expectError(client.completions.create({model, prompt: 'x', max_tokens: 0}),
                    OpenAI.BadRequestError, 400, /max_tokens/);
  await expectError(
      client.chat.completions.create({model, messages: [{role: 'user', content: 'x'}],
                                      tools: [{type: 'function', function: {name: 'f'}}]}),
      OpenAI.BadRequestError, 400, /tools: not supported yet/);
  await expectError(client.completions.create({model: 'gpt-4', prompt: 'x'}),
                    OpenAI.NotFoundError, 404, /does not exist/);
  await expectError(client.completions.create({model, prompt: 'x', temperature: 'hot'}),
                    OpenAI.BadRequestError, 400, /temperature/);
  const stranger = new OpenAI({baseURL, apiKey: 'wrong', maxRetries: 0});
  await expectError(stranger.models.list(), OpenAI.AuthenticationError, 401, /Bearer/);
  // No key at all: the SDK insists on one, so a raw request without the header.
  const r = await fetch(`${baseURL}/models`);
  assert.equal(r.status, 401);
  assert.equal((await r.json()).error.type, 'authentication_error');
}

// logit_bias through the SDK: +100 on one id makes greedy emit only it; a bad key is a 400.
async function logitBias() {
  const r = await client.completions.create({
    model, prompt: 'Echoes', max_tokens: 6, temperature: 0, logprobs: 0,
    return_tokens_as_token_ids: true, logit_bias: {'150': 100}});
  assert.deepEqual(tokenIds(r.choices[0].logprobs.tokens), Array(6).fill(150));
  await expectError(
      client.chat.completions.create({model, messages: [{role: 'user', content: 'x'}],
                                      logit_bias: {'abc': 1}}),
      OpenAI.BadRequestError, 400, /logit_bias\.abc/);
}

// n = 2 with a seed: two choices, and the same seed gives the same choices, whole or streamed
// (the streamed deltas interleave by index).
async function seededSamples() {
  const body = {model, prompt: 'Echoes', max_tokens: 12, n: 2, temperature: 1.0, seed: 1234};
  const a = await client.completions.create(body);
  const b = await client.completions.create(body);
  assert.deepEqual(a.choices.map((c) => c.index), [0, 1]);
  assert.deepEqual(a.choices.map((c) => c.text), b.choices.map((c) => c.text));
  assert.equal(a.usage.completion_tokens, 24);
  const chatBody = {model, messages: [{role: 'user', content: 'Hum'}], max_tokens: 10, n: 2,
                    temperature: 1.0, seed: 77};
  const whole = await client.chat.completions.create(chatBody);
  const texts = ['', ''];
  for await (const chunk of await client.chat.completions.create({...chatBody, stream: true})) {
    for (const c of chunk.choices) texts[c.index] += c.delta?.content ?? '';
  }
  assert.deepEqual(texts, whole.choices.map((c) => c.message.content));
}

// 16 concurrent streams equal their sequential outputs.
async function concurrentStreams() {
  const ref = JSON.parse(fs.readFileSync(referencePath, 'utf8'));
  const bodies = Array.from({length: 16}, (_, i) => ({
    model, prompt: ref.cases[i % ref.cases.length].prompt_tokens, max_tokens: 10 + i, temperature: 0,
    stream: true}));
  const run = async (body) => {
    let text = '';
    for await (const chunk of await client.completions.create(body)) {
      text += chunk.choices[0]?.text ?? '';
    }
    return text;
  };
  const sequential = [];
  for (const body of bodies) sequential.push(await run(body));
  const concurrent = await Promise.all(bodies.map(run));
  assert.deepEqual(concurrent, sequential);
  assert.ok(sequential.every((t) => t.length > 0));
}

// Invalid JSON (the SDK cannot send it: plain fetch) is a 400 naming the body; the server
// keeps serving.
async function invalidJson() {
  const r = await fetch(`${baseURL}/completions`, {
    method: 'POST', body: '{"prompt": "x", ', headers: {
      'Authorization': `Bearer ${apiKey}`, 'Content-Type': 'application/json'}});
  assert.equal(r.status, 400);
  const body = await r.json();
  assert.equal(body.error.type, 'invalid_request_error');
  assert.equal(body.error.code, 400);
  assert.equal((await client.models.retrieve(model)).id, model);
}

// Past server.http_max_connections (8, all held by idle connections) a request is a 503
// (InternalServerError); probes still answer; once they close, requests are served again.
async function overloaded() {
  const idle = await Promise.all(Array.from({length: 8}, () => new Promise((resolve, reject) => {
    const s = net.connect(Number(new URL(tinyRoot).port), '127.0.0.1', () => resolve(s));
    s.on('error', reject);
  })));
  await sleep(200);
  await expectError(tiny.models.list(), OpenAI.InternalServerError, 503, /too many connections/);
  assert.equal((await fetch(`${tinyRoot}/health`)).status, 200);
  for (const s of idle) s.destroy();
  const deadline = Date.now() + 5000;
  while (true) {
    try {
      await tiny.models.list();
      break;
    } catch (e) {
      if (Date.now() > deadline) throw e;
      await sleep(50);
    }
  }
}

// An AbortController cancels a running stream: the request is aborted in the engine and its
// KV blocks freed, the gauges back to 0 within 2 s.
async function cancellation() {
  const controller = new AbortController();
  const stream = await tiny.completions.create({...longBody, stream: true},
                                               {signal: controller.signal});
  // The SDK ends the iteration quietly on an abort (or throws APIUserAbortError): either way
  // it ends early, without a finish_reason.
  let chunks = 0, finish = null;
  try {
    for await (const chunk of stream) {
      assert.equal(chunk.object, 'text_completion');
      finish = chunk.choices[0]?.finish_reason ?? finish;
      if (++chunks === 3) {
        assert.equal(await metric('pagoda:num_requests_running'), 1);
        assert.ok(await metric('pagoda:kv_cache_usage_perc') > 0);
        controller.abort();
      }
    }
  } catch (e) {
    assert.ok(e instanceof OpenAI.APIUserAbortError, String(e));
  }
  assert.ok(controller.signal.aborted);
  assert.ok(chunks >= 3 && chunks < 1000, `${chunks} chunks`);
  assert.equal(finish, null);
  const start = Date.now();
  while (await metric('pagoda:num_requests_running') !== 0 ||
         await metric('pagoda:kv_cache_usage_perc') !== 0) {
    assert.ok(Date.now() - start < 2000, 'the aborted request still runs after 2 s');
    await sleep(20);
  }
  assert.ok(await metric('pagoda:generation_tokens_total') < 1000);
  const aborted = await (await fetch(`${tinyRoot}/metrics`)).text();
  assert.match(aborted, /pagoda:request_success_total\{[^}]*finished_reason="abort"\} 1\n/);
}

// One running and one waiting request at most: of six sent at once, some are refused with 429
// (RateLimitError) and Retry-After; then a 413 (a body over 1 MiB); the server keeps serving.
async function queueFullAndBodyTooLarge() {
  const results = await Promise.allSettled(
      Array.from({length: 6}, () => tiny.completions.create({...longBody})));
  const refused = results.filter((r) => r.status === 'rejected');
  assert.ok(refused.length > 0 && refused.length < 6, `${refused.length} of 6 refused`);
  for (const r of refused) {
    assert.ok(r.reason instanceof OpenAI.RateLimitError, String(r.reason));
    assert.equal(r.reason.status, 429);
    assert.equal(r.reason.headers.get('retry-after'), '1');
    assert.match(r.reason.message, /waiting queue is full/);
  }
  await assert.rejects(tiny.completions.create({prompt: 'x'.repeat(1536 * 1024), max_tokens: 1}),
                       (e) => {
                         assert.ok(e instanceof OpenAI.APIError, String(e));
                         assert.equal(e.status, 413);
                         assert.match(e.message, /larger than server.max_message_bytes/);
                         return true;
                       });
  const after = await tiny.completions.create({prompt: 'Once', max_tokens: 2});
  assert.equal(after.usage.completion_tokens, 2);
}

(async () => {
  for (const [name, fn] of Object.entries({
         models, referenceCompletions, chat, errors, logitBias, seededSamples, concurrentStreams,
         invalidJson, overloaded, cancellation, queueFullAndBodyTooLarge})) {
    await fn();
    console.log(`ok ${name}`);
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
