// ThreadTeam: a fixed team of threads for the parallel loops of a decode step, which are too
// short for oneTBB's wake-up. A decode GEMV call takes 100-250 us on this host; TBB's worker
// started each one 5-13 us late and the two threads finished 6-20 us apart (7-10% of the
// threads' time idle, measured with a trace around the loop). Here the helpers spin between
// loops (no yield: on this host a yield is a hypervisor exit) and claim items from one shared
// counter in shrinking claims, so they start at once and finish close together.
//
// Ownership: the creator owns the team (CpuBackend: one per backend); destruction joins the
// helpers. The thread that calls ParallelFor is member 0 and takes part; size() - 1 helper
// threads are members 1.... One loop at a time: ParallelFor is called from one thread at a
// time and never from inside a body (a nested call runs its loop inline on the calling thread).
// After a loop the helpers spin for `spin` (the serial work between a step's loops), then sleep
// until the next one; a sleeping team costs nothing. While a member waits (a helper between
// loops, the caller for the last claims) it prefetches the bytes it was handed for the next loop
// (SetPrefetch: a decode step's next weight rows), so the memory stream goes on through the
// serial work and the loops' tails.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <utility>
#include <vector>

namespace pagoda::cpu {

// body(begin, end, member): items [begin, end) on team member `member` (0 <= member < size).
// Must not throw. A non-owning view of a callable, valid for the duration of one call.
class LoopBody {
 public:
  template <typename F>
  LoopBody(const F& f)  // NOLINT(google-explicit-constructor): passed as a lambda
      : object_(&f), call_([](const void* o, int64_t b, int64_t e, int m) {
          (*static_cast<const F*>(o))(b, e, m);
        }) {}
  void operator()(int64_t begin, int64_t end, int member) const {
    call_(object_, begin, end, member);
  }

 private:
  const void* object_;
  void (*call_)(const void*, int64_t, int64_t, int);
};

class ThreadTeam {
 public:
  static constexpr int64_t kMaxItems = int64_t{1} << 22;  // items per loop on the team
  explicit ThreadTeam(int size, std::chrono::microseconds spin = std::chrono::microseconds(500));
  ~ThreadTeam();
  ThreadTeam(const ThreadTeam&) = delete;
  ThreadTeam& operator=(const ThreadTeam&) = delete;

  int size() const { return size_; }

  // Runs body over [0, n) and returns when every item is done. Claims from a shared counter
  // take ceil(remaining / (2 size)) items, shrinking to one near the end. One item, n >
  // kMaxItems, a team of one or a nested call: the whole range inline on the calling thread
  // (member 0; the helpers are not woken).
  void ParallelFor(int64_t n, LoopBody body);

  // Items [first, second) that member `member` claims first in a loop of n items, the members
  // coming in order (member 0, the caller, starts the loop; a helper joins when it sees it):
  // what a loop's claims give when no member is late. Empty (first == second) when none left.
  std::pair<int64_t, int64_t> FirstClaim(int64_t n, int member) const;

  // Bytes that member `member` will read first in the next loop (e.g. the rows of its first
  // claim): while it waits -- a helper between loops, member 0 for the others' last claims -- it
  // prefetches them into its caches, kPrefetchStep bytes between checks for work. Replaces the
  // member's earlier ranges; called by the thread that calls ParallelFor, outside a body. Only
  // addresses are kept and prefetch instructions never fault, so the memory need not outlive
  // the call. Up to kMaxPrefetchRanges ranges (more are dropped).
  struct ByteRange {
    const uint8_t* data = nullptr;
    int64_t bytes = 0;
  };
  static constexpr int kMaxPrefetchRanges = 4;
  static constexpr int64_t kPrefetchStep = 2048;
  void SetPrefetch(int member, std::span<const ByteRange> ranges);
  // Member's current ranges, and the bytes it has prefetched since the team started (for tests
  // and diagnostics).
  std::vector<ByteRange> PrefetchRanges(int member) const;
  int64_t PrefetchedBytes(int member) const;

 private:
  // One member's ranges, written under a sequence count (odd while being written).
  struct alignas(64) PrefetchSlot {
    std::atomic<uint32_t> seq{0};
    std::atomic<int> count{0};
    std::atomic<const uint8_t*> data[kMaxPrefetchRanges] = {};
    std::atomic<int64_t> bytes[kMaxPrefetchRanges] = {};
    std::atomic<int64_t> prefetched{0};  // written by the member only
  };
  // A member's progress through its slot's ranges (owned by that member's thread).
  struct PrefetchCursor {
    uint32_t seq = 0;
    int count = 0, range = 0;
    int64_t offset = 0;
    ByteRange ranges[kMaxPrefetchRanges];
  };
  static bool ReadPrefetchSlot(const PrefetchSlot& slot, uint32_t seq, ByteRange* ranges,
                               int* count);
  // Prefetches the next kPrefetchStep bytes of member's ranges; false when none are left.
  bool PrefetchStep(int member, PrefetchCursor& cursor);
  int64_t ClaimSize(int64_t left) const;  // items a claim takes when `left` remain
  bool Claim(uint64_t generation, int64_t* begin, int64_t* end);
  void RunClaims(uint64_t generation, int member);
  void HelperLoop(int member);
  uint64_t AwaitGeneration(uint64_t seen, int member, PrefetchCursor& cursor);

  const int size_;
  const std::chrono::microseconds spin_;
  // generation (20 bits) | n (22 bits) | next item (22 bits): a claim is one compare-exchange,
  // and a helper late for a finished loop cannot claim from the next one.
  // Claims, completions and the rest on separate cache lines (no false sharing between them).
  alignas(64) std::atomic<uint64_t> state_{0};
  alignas(64) std::atomic<int64_t> done_{0};  // items finished in the current loop
  alignas(64) std::atomic<const LoopBody*> body_{nullptr};
  std::atomic<bool> in_loop_{false};  // a loop is running (nested calls run inline)
  std::atomic<bool> stop_{false};
  std::atomic<int> sleepers_{0};
  std::atomic<uint32_t> wake_{0};  // bumped (and notified) when a loop starts while helpers sleep
  std::unique_ptr<PrefetchSlot[]> prefetch_;  // one per member
  PrefetchCursor caller_cursor_;              // member 0's (the ParallelFor caller's)
  std::vector<std::thread> helpers_;
};

// The loop on `team` when given, else on oneTBB (the current arena; member: its thread index,
// < tbb::this_task_arena::max_concurrency()). Concurrency: the members such a loop may use.
void ParallelFor(ThreadTeam* team, int64_t n, LoopBody body);
int Concurrency(const ThreadTeam* team);

}  // namespace pagoda::cpu
