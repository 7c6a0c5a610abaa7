#include "kvcache/kv_cache_config.h"

#include <gtest/gtest.h>

#include <string>

namespace pagoda {
namespace {

KvCacheConfig ValidConfig() {
  KvCacheConfig config;
  config.block_size = 16;
  config.num_blocks = 100;
  config.dtype = KvDtype::kBf16;
  config.n_layers = 2;
  config.n_kv_heads = 4;
  config.head_dim = 64;
  return config;
}

void ExpectInvalid(const KvCacheConfig& config, const std::string& field) {
  Status status = ValidateKvCacheConfig(config);
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << field;
  EXPECT_NE(status.message().find(field), std::string::npos) << status.message();
}

TEST(KvCacheConfigTest, ValidConfigPasses) {
  EXPECT_TRUE(ValidateKvCacheConfig(ValidConfig()).ok());
  for (int32_t bs = 1; bs <= 256; bs *= 2) {
    KvCacheConfig config = ValidConfig();
    config.block_size = bs;
    EXPECT_TRUE(ValidateKvCacheConfig(config).ok()) << bs;
  }
}

TEST(KvCacheConfigTest, BadFieldsAreNamed) {
  for (int32_t bs : {0, -16, 3, 24, 512}) {
    KvCacheConfig config = ValidConfig();
    config.block_size = bs;
    ExpectInvalid(config, "block_size");
  }
  KvCacheConfig config = ValidConfig();
  config.n_layers = 0;
  ExpectInvalid(config, "n_layers");
  config = ValidConfig();
  config.n_kv_heads = -1;
  ExpectInvalid(config, "n_kv_heads");
  config = ValidConfig();
  config.head_dim = 0;
  ExpectInvalid(config, "head_dim");
  config = ValidConfig();
  config.num_blocks = -5;
  ExpectInvalid(config, "num_blocks");
  config = ValidConfig();
  config.num_blocks = int64_t{1} << 40;
  ExpectInvalid(config, "num_blocks");
  config = ValidConfig();
  config.num_blocks = 0;
  ExpectInvalid(config, "num_blocks or memory_bytes");
  config = ValidConfig();
  config.memory_bytes = 1 << 20;
  ExpectInvalid(config, "num_blocks or memory_bytes");
  config = ValidConfig();
  config.num_blocks = 0;
  config.memory_bytes = -1;
  ExpectInvalid(config, "memory_bytes");
  config = ValidConfig();
  config.dtype = static_cast<KvDtype>(42);
  ExpectInvalid(config, "dtype");
}

TEST(KvCacheConfigTest, BytesPerBlock) {
  KvCacheConfig config = ValidConfig();
  // 2 (K,V) * 2 layers * 4 heads * 16 tokens * 64 dims * 2 bytes.
  EXPECT_EQ(KvBytesPerBlockPerLayer(config), 4 * 16 * 64 * 2);
  EXPECT_EQ(KvBytesPerBlock(config), 2 * 2 * 4 * 16 * 64 * 2);
  config.dtype = KvDtype::kFp8E4m3;
  EXPECT_EQ(KvBytesPerBlock(config), 2 * 2 * 4 * 16 * 64);
}

TEST(KvCacheConfigTest, ResolveNumBlocksFromMemory) {
  KvCacheConfig config = ValidConfig();
  EXPECT_EQ(*ResolveNumBlocks(config), 100);
  config.num_blocks = 0;
  config.memory_bytes = KvBytesPerBlock(config) * 37 + 5;
  EXPECT_EQ(*ResolveNumBlocks(config), 37);
  config.memory_bytes = KvBytesPerBlock(config) - 1;
  Result<int32_t> too_small = ResolveNumBlocks(config);
  ASSERT_FALSE(too_small.ok());
  EXPECT_NE(too_small.status().message().find("memory_bytes"), std::string::npos);
  // Huge budgets are capped so that every slot fits in int32.
  config.block_size = 256;
  config.memory_bytes = int64_t{1} << 62;
  EXPECT_EQ(*ResolveNumBlocks(config), INT32_MAX / 256);
}

// kv_cache.memory_bytes: 1 used to give a one-block pool silently; a budget below one block is
// refused at start-up, and a budget of whole blocks gives what it holds.
TEST(KvCacheConfigTest, MemoryBudgetBelowOneBlockIsRefused) {
  KvCacheShape shape;
  shape.n_layers = 2, shape.n_kv_heads = 2, shape.head_dim = 8;
  shape.auto_dtype = KvDtype::kF32;
  shape.max_model_len = 64, shape.max_num_seqs = 4;
  KvCacheOptions o;
  o.memory_bytes = 1;
  const Status st = ResolveKvCacheConfig(o, shape).status();
  EXPECT_EQ(st.message(),
            "kv_cache.memory_bytes: 1 bytes hold no KV block of this model (one block takes "
            "4096 bytes for all layers, K and V)");
  o.memory_bytes = 4096 * 3 + 7;
  EXPECT_EQ(ResolveKvCacheConfig(o, shape)->num_blocks, 3);
  o.memory_bytes = int64_t{1} << 40;  // capped at what max_num_seqs full contexts need
  EXPECT_EQ(ResolveKvCacheConfig(o, shape)->num_blocks, 4 * 4 + 1);
}

TEST(KvCacheConfigTest, DtypeNames) {
  EXPECT_EQ(*ParseKvDtype("f32"), KvDtype::kF32);
  EXPECT_EQ(*ParseKvDtype("BF16"), KvDtype::kBf16);
  EXPECT_EQ(*ParseKvDtype("f16"), KvDtype::kF16);
  EXPECT_EQ(*ParseKvDtype("fp8_e4m3"), KvDtype::kFp8E4m3);
  EXPECT_EQ(*ParseKvDtype("fp8"), KvDtype::kFp8E4m3);
  EXPECT_EQ(ParseKvDtype("int4").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(KvDtypeSize(KvDtype::kF32), 4u);
  EXPECT_EQ(KvDtypeSize(KvDtype::kFp8E4m3), 1u);
  EXPECT_STREQ(KvDtypeName(KvDtype::kBf16), "bf16");
}

}  // namespace
}  // namespace pagoda
