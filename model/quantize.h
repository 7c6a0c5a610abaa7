// Quantizing a model: the per-tensor type choice of llama.cpp's quantization mixes (Q8_0, Q4_0,
// Q4_K_M) and `QuantizeGguf`, which rewrites a GGUF (F32/F16/BF16 or any dequantizable source)
// with its 2-D weights quantized. Used by `pagoda quantize` and `pagoda make-model --dtype`.
//
// The mixes (llama.cpp's llama_tensor_get_type, without an importance matrix):
//  * 1-D tensors (norms, biases) and tensors whose name does not end in "weight": F32.
//  * Q8_0: every 2-D weight Q8_0.
//  * Q4_0: 2-D weights Q4_0; `output.weight` (or `token_embd.weight` when there is no
//    output.weight, i.e. tied embeddings) Q6_K.
//  * Q4_K_M: 2-D weights Q4_K; Q6_K for the output tensor (as above) and for `attn_v.weight`
//    and `ffn_down.weight` of layer i when UseMoreBits(i, n_layers).
//  * Fallback when the row length (ne[0]) is not a multiple of the chosen block size (256 for
//    Q4_K/Q6_K, 32 for Q4_0/Q8_0): Q8_0 if ne[0] % 32 == 0, else F16. (llama.cpp falls back
//    Q4_K -> Q5_0 and Q6_K -> Q8_0; Pagoda has no Q5_0, and Q8_0 is the more accurate choice.)
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

enum class QuantMix { kQ8_0, kQ4_0, kQ4_K_M };

// "q8_0" | "q4_0" | "q4_k_m" (case-insensitive).
std::optional<QuantMix> ParseQuantMix(std::string_view name);
const char* QuantMixName(QuantMix mix);  // "q8_0", ...
// The GGUF general.file_type (llama_ftype) of the mix: Q8_0 = 7, Q4_0 = 2, Q4_K_M = 15.
uint32_t QuantMixFileType(QuantMix mix);
// The mix that `make-model --dtype` means by a quantized weight type (Q8_0, Q4_0, Q4_K ->
// Q4_K_M); nullopt for float types (written uniformly).
std::optional<QuantMix> MixForDtype(GgmlType dtype);

// llama.cpp's rule for layers that get more bits: the first and last eighth, and every third
// layer in between.
bool UseMoreBits(int layer, int n_layers);

// What the model looks like to the mix: layer count and whether output.weight exists.
struct MixContext {
  int n_layers = 0;
  bool has_output = true;
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
