#include "kernels/cpu/thread_team.h"

#include <tbb/blocked_range.h>
#include <tbb/parallel_for.h>
#include <tbb/task_arena.h>

#include <algorithm>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace pagoda::cpu {
namespace {

constexpr int kItemBits = 22;
constexpr uint64_t kItemMask = (uint64_t{1} << kItemBits) - 1;
constexpr uint64_t kGenerationMask = (uint64_t{1} << (64 - 2 * kItemBits)) - 1;

uint64_t GenerationOf(uint64_t state) { return state >> (2 * kItemBits); }
int64_t CountOf(uint64_t state) { return static_cast<int64_t>((state >> kItemBits) & kItemMask); }
int64_t NextOf(uint64_t state) { return static_cast<int64_t>(state & kItemMask); }

void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

}  // namespace

ThreadTeam::ThreadTeam(int size, std::chrono::microseconds spin)
    : size_(std::max(1, size)), spin_(spin), prefetch_(new PrefetchSlot[size_]) {
  helpers_.reserve(static_cast<size_t>(size_ - 1));
  for (int m = 1; m < size_; ++m) helpers_.emplace_back([this, m] { HelperLoop(m); });
}

ThreadTeam::~ThreadTeam() {
  stop_.store(true, std::memory_order_seq_cst);
  wake_.fetch_add(1, std::memory_order_seq_cst);
  wake_.notify_all();
  for (std::thread& t : helpers_) t.join();
}

int64_t ThreadTeam::ClaimSize(int64_t left) const {
  const int64_t share = 2 * static_cast<int64_t>(size_);
  return std::max<int64_t>(1, (left + share - 1) / share);
}

std::pair<int64_t, int64_t> ThreadTeam::FirstClaim(int64_t n, int member) const {
  int64_t begin = 0;
  for (int m = 0; m < member && begin < n; ++m) begin += ClaimSize(n - begin);
  if (begin >= n) return {n, n};
  return {begin, begin + ClaimSize(n - begin)};
}

// One compare-exchange on state_: fails once the loop of `generation` has no items left (or a
// later loop has started).
bool ThreadTeam::Claim(uint64_t generation, int64_t* begin, int64_t* end) {
  uint64_t s = state_.load(std::memory_order_acquire);
  for (;;) {
    const int64_t n = CountOf(s), next = NextOf(s);
    if (GenerationOf(s) != generation || next >= n) return false;
    const int64_t take = ClaimSize(n - next);
    if (state_.compare_exchange_weak(s, s + static_cast<uint64_t>(take), std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      *begin = next;
      *end = next + take;
      return true;
    }
  }
}

// A successful claim keeps the caller in ParallelFor until its items are counted in done_, so
// body_ stays valid while this member runs them.
void ThreadTeam::RunClaims(uint64_t generation, int member) {
  int64_t begin = 0, end = 0;
  while (Claim(generation, &begin, &end)) {
    (*body_.load(std::memory_order_acquire))(begin, end, member);
    done_.fetch_add(end - begin, std::memory_order_release);
  }
}

void ThreadTeam::ParallelFor(int64_t n, LoopBody body) {
  if (n <= 0) return;
  if (size_ == 1 || n == 1 || n > kMaxItems || in_loop_.exchange(true, std::memory_order_acquire)) {
    body(0, n, 0);  // NOTE: a nested call keeps in_loop_ as the outer loop set it
    return;
  }
  const uint64_t generation =
      (GenerationOf(state_.load(std::memory_order_relaxed)) + 1) & kGenerationMask;
  body_.store(&body, std::memory_order_relaxed);
  done_.store(0, std::memory_order_relaxed);
  state_.store((generation << (2 * kItemBits)) | (static_cast<uint64_t>(n) << kItemBits),
               std::memory_order_seq_cst);
  if (sleepers_.load(std::memory_order_seq_cst) > 0) {
    wake_.fetch_add(1, std::memory_order_seq_cst);
    wake_.notify_all();
  }
  RunClaims(generation, 0);
  // The last claims end within a tile of each other; past kPatience a member holding a claim was
  // likely preempted (more runnable threads than cores), so give it the core.
  constexpr auto kPatience = std::chrono::microseconds(50);
  std::chrono::steady_clock::time_point deadline{};
  for (int i = 0; done_.load(std::memory_order_acquire) < n; ++i) {
    if (i == 256) deadline = std::chrono::steady_clock::now() + kPatience;
    if (PrefetchStep(0, caller_cursor_)) continue;
    if (i > 256 && (i & 63) == 0 && std::chrono::steady_clock::now() > deadline) {
      std::this_thread::yield();
    } else {
      CpuRelax();
    }
  }
  in_loop_.store(false, std::memory_order_release);
}

// Spins until a loop newer than `seen` starts (or stop_), then for up to spin_ more; then sleeps
// on wake_. Returns the state's generation (or `seen` when stopping).
uint64_t ThreadTeam::AwaitGeneration(uint64_t seen, int member, PrefetchCursor& cursor) {
  for (;;) {
    const auto deadline = std::chrono::steady_clock::now() + spin_;
    for (int i = 0;; ++i) {
      if (stop_.load(std::memory_order_relaxed)) return seen;
      const uint64_t g = GenerationOf(state_.load(std::memory_order_acquire));
      if (g != seen) return g;
      if (PrefetchStep(member, cursor)) continue;
      if ((i & 255) == 255 && std::chrono::steady_clock::now() > deadline) break;
      CpuRelax();
    }
    // No lost wake-up: ParallelFor stores state_ before it reads sleepers_, this thread bumps
    // sleepers_ before it reads state_ again (all seq_cst), so one of them sees the other.
    sleepers_.fetch_add(1, std::memory_order_seq_cst);
    const uint32_t w = wake_.load(std::memory_order_seq_cst);
    if (!stop_.load(std::memory_order_seq_cst) &&
        GenerationOf(state_.load(std::memory_order_seq_cst)) == seen) {
      wake_.wait(w, std::memory_order_seq_cst);
    }
    sleepers_.fetch_sub(1, std::memory_order_seq_cst);
  }
}

void ThreadTeam::HelperLoop(int member) {
  uint64_t seen = 0;
  PrefetchCursor cursor;
  for (;;) {
    seen = AwaitGeneration(seen, member, cursor);
    if (stop_.load(std::memory_order_acquire)) return;
    RunClaims(seen, member);
  }
}

void ThreadTeam::SetPrefetch(int member, std::span<const ByteRange> ranges) {
  if (member < 0 || member >= size_) return;
  PrefetchSlot& slot = prefetch_[member];
  const uint32_t seq = slot.seq.load(std::memory_order_relaxed);
  slot.seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  const int count = static_cast<int>(std::min<size_t>(ranges.size(), kMaxPrefetchRanges));
  for (int i = 0; i < count; ++i) {
    slot.data[i].store(ranges[i].data, std::memory_order_relaxed);
    slot.bytes[i].store(ranges[i].bytes, std::memory_order_relaxed);
  }
  slot.count.store(count, std::memory_order_relaxed);
  slot.seq.store(seq + 2, std::memory_order_release);
}

// Copies the slot's ranges as of sequence count `seq` into ranges / *count; false when the slot
// is being written or was rewritten meanwhile.
bool ThreadTeam::ReadPrefetchSlot(const PrefetchSlot& slot, uint32_t seq, ByteRange* ranges,
                                  int* count) {
  if ((seq & 1) != 0) return false;
  *count = slot.count.load(std::memory_order_relaxed);
  for (int i = 0; i < *count; ++i) {
    ranges[i] = {slot.data[i].load(std::memory_order_relaxed),
                 slot.bytes[i].load(std::memory_order_relaxed)};
  }
  std::atomic_thread_fence(std::memory_order_acquire);
  return slot.seq.load(std::memory_order_relaxed) == seq;
}

std::vector<ThreadTeam::ByteRange> ThreadTeam::PrefetchRanges(int member) const {
  if (member < 0 || member >= size_) return {};
  ByteRange ranges[kMaxPrefetchRanges];
  int count = 0;
  while (!ReadPrefetchSlot(prefetch_[member], prefetch_[member].seq.load(std::memory_order_acquire),
                           ranges, &count)) {
  }
  return std::vector<ByteRange>(ranges, ranges + count);
}

int64_t ThreadTeam::PrefetchedBytes(int member) const {
  if (member < 0 || member >= size_) return 0;
  return prefetch_[member].prefetched.load(std::memory_order_relaxed);
}

bool ThreadTeam::PrefetchStep(int member, PrefetchCursor& cursor) {
  PrefetchSlot& slot = prefetch_[member];
  const uint32_t seq = slot.seq.load(std::memory_order_acquire);
  if (seq != cursor.seq) {
    if (!ReadPrefetchSlot(slot, seq, cursor.ranges, &cursor.count)) {
      cursor.count = 0;  // retried at the next step
      return false;
    }
    cursor.seq = seq;
    cursor.range = 0;
    cursor.offset = 0;
  }
  if (cursor.range >= cursor.count) return false;
  const ByteRange& r = cursor.ranges[cursor.range];
  const int64_t end = std::min(r.bytes, cursor.offset + kPrefetchStep);
  // Into L2 (T1): the member's own L1 would only be overwritten by the loop's first tiles.
  for (int64_t o = cursor.offset; o < end; o += 64) __builtin_prefetch(r.data + o, 0, 2);
  slot.prefetched.store(slot.prefetched.load(std::memory_order_relaxed) + end - cursor.offset,
                        std::memory_order_relaxed);
  cursor.offset = end;
  if (end >= r.bytes) {
    ++cursor.range;
    cursor.offset = 0;
  }
  return true;
}

void ParallelFor(ThreadTeam* team, int64_t n, LoopBody body) {
  if (team != nullptr) {
    team->ParallelFor(n, body);
    return;
  }
  tbb::parallel_for(tbb::blocked_range<int64_t>(0, n), [&](const tbb::blocked_range<int64_t>& r) {
    body(r.begin(), r.end(), std::max(0, tbb::this_task_arena::current_thread_index()));
  });
}

int Concurrency(const ThreadTeam* team) {
  return team != nullptr ? team->size() : tbb::this_task_arena::max_concurrency();
}

}  // namespace pagoda::cpu
