// The official `openai` Node SDK against `pagoda serve` (started by openai_sdk_e2e_test.py).
// Usage: node sdk_test.cjs SDK_DIR BASE_URL API_KEY REFERENCE_JSON
'use strict';
const assert = require('node:assert/strict');
const fs = require('node:fs');

const [sdkDir, baseURL, apiKey, referencePath] = process.argv.slice(2);
const sdk = require(sdkDir);
const OpenAI = sdk.default ?? sdk;
const model = 'aidreams';
const client = new OpenAI({baseURL, apiKey, maxRetries: 0, timeout: 60000});

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
  const stranger = new OpenAI({baseURL, apiKey: 'wrong', maxRetries: 0});
  await expectError(stranger.models.list(), OpenAI.AuthenticationError, 401, /Bearer/);
}

(async () => {
  for (const [name, fn] of Object.entries({models, referenceCompletions, chat, errors})) {
    await fn();
    console.log(`ok ${name}`);
  }
})().catch((e) => {
  console.error(e);
  process.exit(1);
});
