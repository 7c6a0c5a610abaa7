#include "kernels/cpu/kv_pool.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>

namespace pagoda {
namespace {

KvCacheConfig SmallConfig(KvDtype dtype) {
  KvCacheConfig config;
  config.block_size = 4;
  config.num_blocks = 6;
  config.dtype = dtype;
  config.n_layers = 3;
  config.n_kv_heads = 2;
  config.head_dim = 8;
  return config;
}

TEST(KvPoolTest, LayoutAndAlignment) {
  Result<KvPool> pool = KvPool::Create(SmallConfig(KvDtype::kF32));
  ASSERT_TRUE(pool.ok()) << pool.status().ToString();
  const KvPoolStrides& s = pool->strides();
  EXPECT_EQ(s.token, 8);
  EXPECT_EQ(s.head, 4 * 8);
  EXPECT_EQ(s.block, 2 * 4 * 8);
  EXPECT_EQ(s.kv, 6 * 2 * 4 * 8);
  EXPECT_EQ(pool->block_bytes(), 2 * 4 * 8 * 4);
  for (int32_t layer = 0; layer < 3; ++layer) {
    EXPECT_EQ(reinterpret_cast<uintptr_t>(pool->layer_data(layer)) % 64, 0u);
    float* base = reinterpret_cast<float*>(pool->layer_data(layer));
    EXPECT_EQ(pool->Block<float>(layer, KvPart::kKey, 3), base + 3 * s.block);
    EXPECT_EQ(pool->Block<float>(layer, KvPart::kValue, 3), base + s.kv + 3 * s.block);
    EXPECT_EQ(pool->Block<float>(layer, KvPart::kValue, 5)[s.block - 1], 0.0f);  // zeroed
  }
  EXPECT_THROW(pool->Block<uint16_t>(0, KvPart::kKey, 0), std::logic_error);
}

TEST(KvPoolTest, SizedFromMemoryBudget) {
  KvCacheConfig config = SmallConfig(KvDtype::kFp8E4m3);
  config.num_blocks = 0;
  config.memory_bytes = KvBytesPerBlock(config) * 10;
  Result<KvPool> pool = KvPool::Create(config);
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->num_blocks(), 10);
  EXPECT_EQ(pool->config().num_blocks, 10);
  EXPECT_EQ(pool->Block<uint8_t>(2, KvPart::kKey, 9) + pool->block_bytes(),
            pool->Block<uint8_t>(2, KvPart::kValue, 0));
}

TEST(KvPoolTest, BadConfigIsAnError) {
  KvCacheConfig config = SmallConfig(KvDtype::kF16);
  config.head_dim = 0;
  Result<KvPool> pool = KvPool::Create(config);
  ASSERT_FALSE(pool.ok());
  EXPECT_NE(pool.status().message().find("head_dim"), std::string::npos);
}

TEST(KvPoolTest, Fp8ScalesDefaultToOneAndAreValidated) {
  Result<KvPool> pool = KvPool::Create(SmallConfig(KvDtype::kFp8E4m3));
  ASSERT_TRUE(pool.ok());
  EXPECT_EQ(pool->k_scale(1), 1.0f);
  EXPECT_EQ(pool->v_scale(1), 1.0f);
  EXPECT_TRUE(pool->SetScales(1, 0.5f, 2.0f).ok());
  EXPECT_EQ(pool->k_scale(1), 0.5f);
  EXPECT_EQ(pool->v_scale(1), 2.0f);
  EXPECT_EQ(pool->SetScales(1, 0.0f, 1.0f).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->SetScales(3, 1.0f, 1.0f).code(), StatusCode::kInvalidArgument);
}

TEST(KvPoolTest, CopyBlockCopiesAllLayersKAndVOnly) {
  Result<KvPool> pool = KvPool::Create(SmallConfig(KvDtype::kBf16));
  ASSERT_TRUE(pool.ok());
  const int64_t n = pool->strides().block;
  for (int32_t layer = 0; layer < 3; ++layer) {
    for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
      uint16_t* src = pool->Block<uint16_t>(layer, part, 1);
      for (int64_t i = 0; i < n; ++i) src[i] = static_cast<uint16_t>(layer * 1000 + i + 1);
    }
  }
  ASSERT_TRUE(pool->CopyBlocks(std::vector<BlockCopy>{{1, 4}}).ok());
  for (int32_t layer = 0; layer < 3; ++layer) {
    for (KvPart part : {KvPart::kKey, KvPart::kValue}) {
      const uint16_t* dst = pool->Block<uint16_t>(layer, part, 4);
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(dst[i], layer * 1000 + i + 1);
      EXPECT_EQ(pool->Block<uint16_t>(layer, part, 3)[0], 0);  // neighbours untouched
      EXPECT_EQ(pool->Block<uint16_t>(layer, part, 5)[0], 0);
    }
  }
  EXPECT_EQ(pool->CopyBlock(1, 6).code(), StatusCode::kOutOfRange);
  EXPECT_EQ(pool->CopyBlock(-1, 2).code(), StatusCode::kOutOfRange);
}

}  // namespace
}  // namespace pagoda
