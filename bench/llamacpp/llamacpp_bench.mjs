// llama.cpp's prefill and decode speed on a GGUF file, through node-llama-cpp (the npm package
// that ships llama.cpp's CPU backends prebuilt, one per x86 generation, chosen at load like
// llama.cpp's own GGML_BACKEND_DL build): the comparison figures of bench/compare_llamacpp.py.
//
// Usage: node llamacpp_bench.mjs --model M.gguf [--prompt-len 128] [--gen-len 64]
//          [--repetitions 1] [--threads 2]
// Prints one JSON object: per run, prefill tok/s (prompt-len - 1 tokens evaluated without
// sampling) and decode tok/s (gen-len - 1 greedy steps after the first generated token), plus
// the llama.cpp release and the CPU variant loaded. One sequence only: node-llama-cpp did not
// put several sequences' decode tokens into one llama_decode here (4 sequences decoded at 1.3x
// the rate of one), so a batched figure would measure the binding, not llama.cpp.
import {readFileSync} from "node:fs";
import {getLlama, LlamaLogLevel} from "node-llama-cpp";

// The package's own version: its package.json, two folders up from its entry point (dist/).
const NODE_LLAMA_CPP_VERSION = JSON.parse(readFileSync(
    new URL("../package.json", import.meta.resolve("node-llama-cpp")), "utf8")).version;

function parseArgs(argv) {
  const opts = {model: "", promptLen: 128, genLen: 64, repetitions: 1, threads: 2};
  const names = {"--model": "model", "--prompt-len": "promptLen", "--gen-len": "genLen",
                 "--repetitions": "repetitions", "--threads": "threads"};
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === "--help" || argv[i] === "-h") {
      console.log("Usage: node llamacpp_bench.mjs --model M.gguf [--prompt-len N] [--gen-len N]" +
                  " [--repetitions N] [--threads N]");
      process.exit(0);
    }
    const key = names[argv[i]];
    if (key === undefined || i + 1 >= argv.length) throw new Error(`bad argument: ${argv[i]}`);
    opts[key] = key === "model" ? argv[++i] : Number.parseInt(argv[++i], 10);
    if (key !== "model" && !(opts[key] > 0)) throw new Error(`${argv[i - 1]}: expected a positive integer`);
  }
  if (!opts.model) throw new Error("--model is required");
  if (opts.genLen < 2) throw new Error("--gen-len: expected at least 2");
  return opts;
}

// A prompt of ordinary vocabulary ids, different per run (no prefix reuse).
function prompt(len, run, vocab) {
  return Array.from({length: len}, (_, i) => 100 + ((i * 7919 + run * 31) % (vocab - 200)));
}

async function timedRun(model, opts, run) {
  const ctx = await model.createContext({
    contextSize: opts.promptLen + opts.genLen + 16, batchSize: 512, threads: opts.threads,
    flashAttention: false});
  const seq = ctx.getSequence();
  const tokens = prompt(opts.promptLen, run, model.tokens.vocabularySize ?? 32000);
  const t0 = performance.now();
  // Every prompt token but the last, which starts the generation below.
  await seq.evaluateWithoutGeneratingNewTokens(tokens.slice(0, -1));
  const t1 = performance.now();
  let n = 0, t2 = 0;
  for await (const _ of seq.evaluate(tokens.slice(-1), {temperature: 0})) {
    if (++n === 1) t2 = performance.now();
    if (n >= opts.genLen) break;
  }
  const t3 = performance.now();
  await ctx.dispose();
  return {prefill_tokens_per_s: (opts.promptLen - 1) / ((t1 - t0) / 1000),
          decode_tokens_per_s: (opts.genLen - 1) / ((t3 - t2) / 1000)};
}

const opts = parseArgs(process.argv.slice(2));
let variant = "";
const llama = await getLlama({gpu: false, build: "never", maxThreads: opts.threads,
                              logLevel: LlamaLogLevel.debug,  // parsed below, not printed
                              logger: (_, text) => {
                                const m = /loaded CPU backend from .*libggml-cpu-([\w-]+)\.so/.exec(text);
                                if (m) variant = m[1];
                              }});
const model = await llama.loadModel({modelPath: opts.model, gpuLayers: 0});
const runs = [];
for (let r = 0; r < opts.repetitions; ++r) runs.push(await timedRun(model, opts, r));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
console.log(JSON.stringify({
  engine: "llama.cpp", llama_cpp_release: llama.llamaCppRelease?.release ?? "", node_llama_cpp_version: NODE_LLAMA_CPP_VERSION, cpu_variant: variant,
  model: opts.model, prompt_len: opts.promptLen, gen_len: opts.genLen,
  threads: opts.threads, runs,
  prefill_tokens_per_s: median(runs.map((r) => r.prefill_tokens_per_s)),
  decode_tokens_per_s: median(runs.map((r) => r.decode_tokens_per_s))}));
await model.dispose();
await llama.dispose();
