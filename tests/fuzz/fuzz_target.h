// The entry points every fuzz target in tests/fuzz/ defines, in libFuzzer's convention:
//   LLVMFuzzerTestOneInput(data, size)  parses one input; must never crash, hang or leak,
//                                       whatever the bytes (a rejected input is fine);
//   LLVMFuzzerInitialize(argc, argv)    optional one-time set-up.
// Built two ways (tests/fuzz/CMakeLists.txt): with clang's -fsanitize=fuzzer for `make fuzz`,
// and with replay_main.cc for `make test`, which feeds each file of the seed corpus and of the
// committed regression inputs once. Helpers shared by the targets live here too.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "model/tokenizer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace pagoda::fuzz {

inline std::string_view AsText(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Round-trips a few strings through a tokenizer that loaded, so a vocabulary that passed
// validation but breaks encoding or decoding is found too. Returns nothing: crashes are the bug.
inline void ExerciseTokenizer(const Tokenizer& tok) {
  for (std::string_view text : {"Hello world", " <s>x</s> <|endoftext|>\n\t", "\xe4\xb8\xad\xff"}) {
    const auto ids = tok.Encode(text, /*add_bos=*/true);
    (void)tok.Decode(ids);
  }
  for (int32_t id = 0; id < tok.vocab_size() && id < 64; ++id) (void)tok.TokenBytes(id);
}

}  // namespace pagoda::fuzz
