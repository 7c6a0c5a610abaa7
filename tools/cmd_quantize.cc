// `pagoda quantize IN OUT --type q8_0|q4_0|q4_k_m|q5_0|q5_k_m|q3_k_m|q2_k|iq4_nl|iq4_xs`: rewrites
// a GGUF with its 2-D weights quantized (see model/quantize.h for the per-tensor mix).
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>

#include "model/quantize.h"
#include "tools/commands.h"

namespace pagoda::cli {
namespace {

struct QuantizeArgs {
  std::string input, output, type = "q4_k_m";
  bool json = false, quiet = false;
};

nlohmann::json ReportJson(const QuantizeArgs& args, const QuantizeReport& r) {
  std::map<std::string, int64_t> bytes_by_type, tensors_by_type;
  nlohmann::json tensors = nlohmann::json::array();
  for (const QuantizedTensor& t : r.tensors) {
    bytes_by_type[TypeName(t.to)] += t.bytes;
    tensors_by_type[TypeName(t.to)] += 1;
    tensors.push_back({{"name", t.name},
                       {"shape", t.ne},
                       {"from", TypeName(t.from)},
                       {"to", TypeName(t.to)},
                       {"bytes", t.bytes}});
  }
  return {{"input", args.input},
          {"output", args.output},
          {"type", QuantMixName(r.mix)},
          {"file_type", QuantMixFileType(r.mix)},
          {"input_bytes", r.input_bytes},
          {"output_bytes", r.output_bytes},
          {"n_tensors", r.tensors.size()},
          {"bytes_by_type", bytes_by_type},
          {"tensors_by_type", tensors_by_type},
          {"tensors", tensors}};
}

int RunQuantize(const QuantizeArgs& args) {
  const auto mix = ParseQuantMix(args.type);
  if (!mix) {
    std::fprintf(stderr, "error: --type: '%s' (expected %s)\n", args.type.c_str(),
                 DescribeQuantMixes().c_str());
    return 2;
  }
  auto report = QuantizeGguf(
      args.input, args.output, *mix, [&](int64_t i, int64_t n, const QuantizedTensor& t) {
        if (args.quiet) return;
        std::fprintf(stderr, "[pagoda] quantize: tensor %lld/%lld %s %s -> %s\n",
                     static_cast<long long>(i), static_cast<long long>(n), t.name.c_str(),
                     TypeName(t.from), TypeName(t.to));
      });
  if (!report.ok()) {
    std::fprintf(stderr, "error: %s\n", report.status().ToString().c_str());
    return 1;
  }
  if (args.json) {
    std::printf("%s\n", ReportJson(args, *report).dump(2).c_str());
  } else if (!args.quiet) {
    std::fprintf(stderr, "[pagoda] wrote %s (%lld -> %lld bytes)\n", args.output.c_str(),
                 static_cast<long long>(report->input_bytes),
                 static_cast<long long>(report->output_bytes));
  }
  return 0;
}

}  // namespace

void RegisterQuantize(CLI::App& app, int* exit_code) {
  auto args = std::make_shared<QuantizeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "quantize", "Write a copy of a GGUF (F32/F16/BF16 weights) with its 2-D weights quantized");
  cmd->add_option("input", args->input, "Input GGUF")->required();
  cmd->add_option("output", args->output, "Output GGUF")->required();
  cmd->add_option("--type,-t", args->type,
                  "llama.cpp's mixes: q8_0 | q4_0 / q5_0 (output.weight Q6_K) | q4_k_m / q5_k_m "
                  "(Q4_K / Q5_K, with Q6_K for output.weight and attn_v/ffn_down in about half "
                  "the layers) | q3_k_m (Q3_K; attn_v Q5_K/Q4_K, attn_output and ffn_down Q4_K) | "
                  "q2_k (Q2_K; attn_v Q4_K with GQA, attn_output and ffn_down Q3_K) | iq4_nl / "
                  "iq4_xs (output.weight Q6_K, attn_v Q5_K with GQA)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print a JSON summary (sizes, types) on stdout");
  cmd->add_flag("--quiet,-q", args->quiet, "No progress output");
  cmd->callback([args, exit_code] { *exit_code = RunQuantize(*args); });
}

}  // namespace pagoda::cli
