// Backend: the seam between the engine and the hardware. The engine hands one step batch
// (token ids, per-sequence block tables and computed-token counts, slot mapping, which rows need
// logits) and gets logits back. A backend owns its KV pool memory and its weights' device copy;
// the engine's KvCacheManager (kvcache/) owns the bookkeeping (which block ids belong to whom).
//
// Implementations: kernels/cpu (CpuBackend, the default), kernels/neuron (NeuronBackend, compiled
// programs through libnrt); runtime/ builds the one the config selects.
// Thread-safety: one engine thread calls Execute; no method is called concurrently.
//
// Start-up errors (each backend's Create): the Status code says what failed, and runtime/ maps it
// to the process exit code (runtime/runtime.h StartupExitCode):
//   UNAVAILABLE          the device runtime cannot be loaded or initialised;
//   FAILED_PRECONDITION  the compiled artifacts are invalid or do not match the model / config;
//   INVALID_ARGUMENT     an option conflicts with the environment or is out of range;
//   anything else        start-up failed (e.g. RESOURCE_EXHAUSTED: the KV pool cannot be had).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "common/status.h"
#include "kvcache/kv_types.h"

namespace pagoda {

// One sequence's share of a step. Its tokens are rows [query_start, query_start + query_len) of
// StepBatch::token_ids; token i sits at position num_computed_tokens + i. Decode sequences
// (generated tokens, usually query_len 1) come first in a batch, then prefill chunks.
struct StepSequence {
  int32_t query_start = 0;
  int32_t query_len = 0;
  int32_t num_computed_tokens = 0;       // tokens already in the KV cache
  std::span<const int32_t> block_table;  // covers num_computed_tokens + query_len positions
  bool is_decode = false;                // true: attention_block_tkg path; false: prefill
  // Logits wanted for this sequence's last num_logits tokens, in [0, query_len]: 1 for the
  // next token, k + 1 when a decode verifies k speculative tokens (rows in position order).
  int32_t num_logits = 1;
};

struct StepBatch {
  std::span<const int32_t> token_ids;       // [num_tokens]
  std::span<const int32_t> slot_mapping;    // [num_tokens]; < 0 = do not write KV
  std::span<const StepSequence> seqs;       // decodes first, rows ascending, no overlap
  std::span<const BlockCopy> block_copies;  // copy-on-write copies to apply before the step
};

// The most tokens a decode sequence carries in one step: its last token plus up to 16 speculative
// ones (speculative.num_tokens). A backend sizes its decode workspace for it (or splits).
inline constexpr int32_t kMaxDecodeTokensPerSeq = 17;

// What the engine may put into one step; the backend sizes its buffers for it. From the config's
// engine section (SchedulerConfig); no defaults here.
struct StepLimits {
  int32_t max_num_batched_tokens = 0;
  int32_t max_num_seqs = 0;
};

struct BackendCapabilities {
  std::string name;                    // "cpu", "neuron"
  std::string kernels;                 // for logs: CPU kernels' SIMD level ("avx512vnni"), "neuron"
  int32_t max_num_batched_tokens = 0;  // per step
  int32_t max_num_seqs = 0;            // per step
  int32_t max_model_len = 0;           // context length a sequence may reach
  int32_t num_blocks = 0;              // KV pool size
  int32_t block_size = 0;
  int64_t packed_weight_bytes = 0;  // for logs: CPU load-time packed weight copies (0: none)
  // StepSequence::num_logits > 1 (speculative verification) is supported.
  bool multi_token_logits = false;
  // A sequence's logits do not depend on the other sequences of its steps, on prompt chunking or
  // on prefix-cache hits (CPU: backend.batch_invariant).
  bool batch_invariant = false;
};

class Backend {
 public:
  virtual ~Backend() = default;

  // Runs one step. `logits` (owned by the caller) receives [n][vocab] rows, one per sequence
  // per wanted position (StepSequence::num_logits), in batch order; it must hold exactly that many
  // rows. Errors: INVALID_ARGUMENT for a malformed batch (nothing is written), INTERNAL for a
  // device failure (the KV of this step's sequences is then unspecified and the engine must fail or
  // recompute them).
  virtual Status Execute(const StepBatch& batch, std::span<float> logits) = 0;

  virtual const BackendCapabilities& capabilities() const = 0;
  virtual int32_t vocab_size() const = 0;

  // False once the backend hit a fatal device or runtime error: its later steps fail and the
  // server reports NOT_SERVING. Unlike Execute, safe to call from any thread. Never recovers.
  virtual bool healthy() const { return true; }
};

}  // namespace pagoda
