// LineVector<T>: a std::vector whose storage starts on a 64-byte cache line.
//
// The SIMD kernels load 64-byte vectors at multiples of 64 bytes into their buffers; from plain
// malloc (16-byte aligned; large blocks sit 16 bytes past a page) each such load spans two lines
// and runs at half rate on the hosts measured (kernels/cpu/matmul/matmul.cc PreparedActivations).
// Use it for buffers that kernels read in whole vectors; it is a std::vector in all else.
#pragma once

#include <cstddef>
#include <new>
#include <vector>

namespace pagoda {

template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::align_val_t kAlign{64};
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT(google-explicit-constructor)
  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlign)); }
  void deallocate(T* p, size_t n) { ::operator delete(p, n * sizeof(T), kAlign); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};

template <class T>
using LineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace pagoda
