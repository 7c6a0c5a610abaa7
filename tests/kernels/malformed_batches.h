// Malformed step batches every backend must refuse (kernels/step_batch_check.h), for the CPU
// and Neuron backend tests: each case breaks one rule of a valid one-sequence prefill batch and
// names the field the error must mention. Header-only test helper.
#pragma once

#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/backend.h"

namespace pagoda::testing {

// Owns the storage a StepBatch points into.
struct OwnedBatch {
  std::string name;
  std::string field;  // the error message must contain it
  std::vector<int32_t> token_ids, slot_mapping, block_table;
  std::vector<StepSequence> seqs;
  std::vector<BlockCopy> copies;
  size_t logit_rows = 1;

  StepBatch batch() const { return {token_ids, slot_mapping, seqs, copies}; }
  // Call after every mutation of the vectors (the spans point into them).
  void Relink() {
    for (StepSequence& s : seqs) s.block_table = block_table;
  }
};

// One prefill of `len` tokens (token ids 1..) in blocks 0, 1, ... of `block_size`.
inline OwnedBatch ValidPrefill(int32_t len, int32_t block_size) {
  OwnedBatch b;
  b.name = "valid";
  b.token_ids.resize(len);
  std::iota(b.token_ids.begin(), b.token_ids.end(), 1);
  b.slot_mapping.resize(len);
  std::iota(b.slot_mapping.begin(), b.slot_mapping.end(), 0);
  for (int32_t i = 0; i < (len + block_size - 1) / block_size; ++i) b.block_table.push_back(i);
  b.seqs.push_back({0, len, 0, {}, false, true});
  b.Relink();
  return b;
}

// `len` must be >= 2 and fit caps.max_num_batched_tokens; vocab >= len + 1.
inline std::vector<OwnedBatch> MalformedBatches(const BackendCapabilities& caps, int32_t vocab,
                                                int32_t len) {
  std::vector<OwnedBatch> out;
  auto add = [&](std::string name, std::string field, auto&& mutate) {
    OwnedBatch b = ValidPrefill(len, caps.block_size);
    b.name = std::move(name);
    b.field = std::move(field);
    mutate(b);
    b.Relink();
    out.push_back(std::move(b));
  };
  add("no tokens", "token_ids", [](OwnedBatch& b) {
    b.token_ids.clear();
    b.slot_mapping.clear();
    b.seqs.clear();
  });
  add("more tokens than max_num_batched_tokens", "token_ids", [&](OwnedBatch& b) {
    const int32_t n = caps.max_num_batched_tokens + 1;
    b.token_ids.assign(n, 1);
    b.slot_mapping.assign(n, -1);
    b.seqs = {{0, n, 0, {}, false, true}};
  });
  add("more sequences than max_num_seqs", "seqs", [&](OwnedBatch& b) {
    const int32_t n = caps.max_num_seqs + 1;
    b.token_ids.assign(n, 1);
    b.slot_mapping.assign(n, -1);
    b.seqs.clear();
    for (int32_t i = 0; i < n; ++i) b.seqs.push_back({i, 1, 0, {}, true, true});
    b.logit_rows = n;
  });
  add("slot_mapping shorter than token_ids", "slot_mapping",
      [](OwnedBatch& b) { b.slot_mapping.pop_back(); });
  add("slot past the pool", "slot_mapping",
      [&](OwnedBatch& b) { b.slot_mapping[0] = caps.num_blocks * caps.block_size; });
  add("token id = vocab", "token_ids", [&](OwnedBatch& b) { b.token_ids[0] = vocab; });
  add("negative token id", "token_ids", [](OwnedBatch& b) { b.token_ids[1] = -1; });
  add("block id past the pool", "block",
      [&](OwnedBatch& b) { b.block_table[0] = caps.num_blocks; });
  add("negative block id", "block", [](OwnedBatch& b) { b.block_table[0] = -1; });
  add("block table too short", "block_table", [](OwnedBatch& b) { b.block_table.clear(); });
  add("rows not covering token_ids", "seqs", [](OwnedBatch& b) { b.seqs[0].query_len -= 1; });
  add("decode after a prefill", "decodes", [&](OwnedBatch& b) {
    b.seqs[0].query_len -= 1;
    b.seqs.push_back({len - 1, 1, 0, {}, true, true});
    b.logit_rows = 2;
  });
  add("logits for two rows", "logits", [](OwnedBatch& b) { b.logit_rows = 2; });
  add("block copy past the pool", "block_copies", [&](OwnedBatch& b) {
    b.copies.push_back({0, caps.num_blocks});
  });
  return out;
}

}  // namespace pagoda::testing
