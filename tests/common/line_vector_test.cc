// LineVector: storage on 64-byte lines at every size, after growth and in copies.
#include "common/line_vector.h"

#include <gtest/gtest.h>

#include <cstdint>

namespace pagoda {
namespace {

template <class T>
bool OnLine(const LineVector<T>& v) {
  return reinterpret_cast<uintptr_t>(v.data()) % 64 == 0;
}

TEST(LineVector, StartsOnACacheLineAtEverySizeAndAfterGrowth) {
  // Sizes around malloc's thresholds (small bins, and the mmap'd blocks that start 16 bytes past
  // a page).
  for (size_t n : {1, 3, 17, 100, 4096, 70000, 200000, 1 << 22}) {
    LineVector<int8_t> bytes(n, 1);
    LineVector<float> floats(n);
    EXPECT_TRUE(OnLine(bytes)) << n;
    EXPECT_TRUE(OnLine(floats)) << n;
    bytes.resize(3 * n + 5);
    EXPECT_TRUE(OnLine(bytes)) << n;
    EXPECT_EQ(bytes[n - 1], 1);
  }
}

TEST(LineVector, CopiesAreOnACacheLineToo) {
  const LineVector<int16_t> a = {1, 2, 3};
  const LineVector<int16_t> b = a;  // the copy allocates through the (propagated) allocator
  EXPECT_TRUE(OnLine(b));
  EXPECT_EQ(b, a);
}

}  // namespace
}  // namespace pagoda
