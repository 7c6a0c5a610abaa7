// Quantizing a model: the per-tensor type choice of llama.cpp's quantization mixes (Q8_0, Q4_0,
// Q4_K_M, Q5_0, Q5_K_M, Q3_K_M, Q2_K, IQ4_NL, IQ4_XS) and `QuantizeGguf`, which rewrites a GGUF
// (F32/F16/BF16 or any dequantizable source) with its 2-D weights quantized. Used by `pagoda
// quantize` and `pagoda make-model --dtype`.
//
// The mixes (llama.cpp's llama_tensor_get_type, without an importance matrix):
//  * 1-D tensors (norms, biases) and tensors whose name does not end in "weight": F32.
//  * Q8_0: every 2-D weight Q8_0.
//  * Q4_0: 2-D weights Q4_0; `output.weight` (or `token_embd.weight` when there is no
//    output.weight, i.e. tied embeddings) Q6_K.
//  * Q4_K_M: 2-D weights Q4_K; Q6_K for the output tensor (as above) and for `attn_v.weight`
//    and `ffn_down.weight` of layer i when UseMoreBits(i, n_layers).
//  * Q5_0: as Q4_0 with Q5_0.  Q5_K_M: as Q4_K_M with Q5_K.
//  * Q3_K_M: 2-D weights Q3_K; output Q6_K; attn_v Q5_K in layers 0-1, else Q4_K; ffn_down Q5_K
//    in layers < n_layers / 16, else Q4_K; attn_output Q4_K.
//  * Q2_K: 2-D weights Q2_K; output Q6_K; attn_v Q4_K when heads / kv heads >= 4 (GQA), else
//    Q3_K; ffn_down and attn_output Q3_K.
//  * IQ4_NL / IQ4_XS: 2-D weights of that type; output Q6_K; attn_v Q5_K with GQA (heads / kv
//    heads >= 4); ffn_down Q5_K in layers < n_layers / 8.
//  (llama.cpp counts attn_v and ffn_down tensors in file order where these rules say layer; the
//  same for llama.cpp's own files, which store layers in order.)
//  * Fallback when the row length (ne[0]) is not a multiple of the chosen block size (256 for
//    the K-quants, 32 for the others): Q8_0 if ne[0] % 32 == 0, else F16. (llama.cpp falls back
//    to IQ4_NL / Q5_0 / Q5_1 / Q8_0; Q8_0 is the more accurate choice.)
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/tensor_types.h"

namespace pagoda {

enum class QuantMix { kQ8_0, kQ4_0, kQ4_K_M, kQ5_0, kQ5_K_M, kQ3_K_M, kQ2_K, kIQ4_NL, kIQ4_XS };

// "q8_0" | "q4_0" | "q4_k_m" | "q5_0" | "q5_k_m" | "q3_k_m" | "q2_k" | "iq4_nl" | "iq4_xs"
// (case-insensitive).
std::optional<QuantMix> ParseQuantMix(std::string_view name);
// "one of q8_0, q4_0, ..." for error messages and --help.
std::string DescribeQuantMixes();
const char* QuantMixName(QuantMix mix);   // "q8_0", ...
GgmlType QuantMixBaseType(QuantMix mix);  // the type most weights get: Q4_K for q4_k_m, ...
// The GGUF general.file_type (llama_ftype) of the mix: Q8_0 = 7, Q4_0 = 2, Q4_K_M = 15,
// Q5_0 = 8, Q5_K_M = 17, Q3_K_M = 12, Q2_K = 10, IQ4_NL = 25, IQ4_XS = 30.
uint32_t QuantMixFileType(QuantMix mix);
// The mix whose base weight type is `dtype` (what `make-model --dtype` means by a quantized
// type: Q8_0, Q4_0, Q4_K -> Q4_K_M, Q5_0, Q5_K -> Q5_K_M, Q3_K -> Q3_K_M, Q2_K, IQ4_NL,
// IQ4_XS); nullopt for float types (written uniformly).
std::optional<QuantMix> MixForDtype(GgmlType dtype);

// llama.cpp's rule for layers that get more bits: the first and last eighth, and every third
// layer in between.
bool UseMoreBits(int layer, int n_layers);

// What the model looks like to the mix: layer count, whether output.weight exists, GQA group.
struct MixContext {
  int n_layers = 0;
  bool has_output = true;
  int n_gqa = 1;  // attention heads per KV head
};
// The type tensor `name` with GGML shape `ne` gets under `mix` (see the header comment).
GgmlType TensorTypeForMix(QuantMix mix, const std::string& name, const std::vector<int64_t>& ne,
                          const MixContext& ctx);

struct QuantizedTensor {
  std::string name;
  std::vector<int64_t> ne;
  GgmlType from, to;
  int64_t bytes;  // of the output tensor
};
struct QuantizeReport {
  QuantMix mix;
  int64_t input_bytes = 0, output_bytes = 0;  // file sizes
  std::vector<QuantizedTensor> tensors;       // in file order
};

// Reads `input`, writes `output` with the tensors converted per `mix`, metadata copied and
// general.file_type / general.quantization_version set. `progress(i, n, tensor)` is called
// after each tensor. Errors: the GGUF reader's, INVALID_ARGUMENT naming a tensor whose type
// cannot be read, the writer's.
Result<QuantizeReport> QuantizeGguf(
    const std::string& input, const std::string& output, QuantMix mix,
    const std::function<void(int64_t, int64_t, const QuantizedTensor&)>& progress = {});

}  // namespace pagoda
