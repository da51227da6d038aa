// The SIGBUS guard of file mappings (see mapping_guard.h). The handler only reads atomics and
// calls mmap, a plain system call on Linux; the table of slots is static, so it never allocates.
// Tested in tests/cpu/test_mapping_guard.cpp.
#include "io/mapping_guard.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>
#include <mutex>

namespace fp8kit::io {
namespace {

constexpr int kSlots = 4096;
constexpr uintptr_t kClaimed = 1;  // a slot being filled or emptied; never a mapping address

struct Slot {
  std::atomic<uintptr_t> begin{0};
  std::atomic<uintptr_t> end{0};
  std::atomic<bool> faulted{false};
};

Slot g_slots[kSlots];
std::atomic<int> g_slots_used{0};  // one past the highest slot ever claimed: the handler's scan
uintptr_t g_page_size = 4096;  // set before the handler is installed: sysconf is not signal-safe
struct sigaction g_previous {};
std::once_flag g_install_once;

void fall_through(int sig, siginfo_t* info, void* context) {
  if (g_previous.sa_flags & SA_SIGINFO) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN) {
    g_previous.sa_handler(sig);
    return;
  }
  // The default action: returning re-executes the faulting access, which now kills the process.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGBUS, &dfl, nullptr);
}

void on_sigbus(int sig, siginfo_t* info, void* context) {
  if (info != nullptr && info->si_code == BUS_ADRERR) {
    const auto addr = reinterpret_cast<uintptr_t>(info->si_addr);
    const uintptr_t page = g_page_size;
    const int used = g_slots_used.load(std::memory_order_acquire);
    for (int i = 0; i < used; ++i) {
      Slot& s = g_slots[i];
      const uintptr_t begin = s.begin.load(std::memory_order_acquire);
      if (begin <= kClaimed || addr < begin) continue;
      const uintptr_t end = s.end.load(std::memory_order_acquire);
      if (addr >= end) continue;
      // Every page from here on lies past the end of the file too: zeros for all of them.
      const uintptr_t first = addr / page * page;
      const uintptr_t last = (end + page - 1) / page * page;
      void* zeros = ::mmap(reinterpret_cast<void*>(first), last - first, PROT_READ,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
      if (zeros == MAP_FAILED) break;
      s.faulted.store(true, std::memory_order_release);
      return;
    }
  }
  fall_through(sig, info, context);
}

void install_handler() {
  g_page_size = static_cast<uintptr_t>(::sysconf(_SC_PAGESIZE));
  struct sigaction action {};
  action.sa_sigaction = on_sigbus;
  action.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigemptyset(&action.sa_mask);
  ::sigaction(SIGBUS, &action, &g_previous);
}

}  // namespace

MappingGuard::MappingGuard(const void* addr, size_t length) {
  std::call_once(g_install_once, install_handler);
  for (int i = 0; i < kSlots; ++i) {
    uintptr_t expected = 0;
    if (!g_slots[i].begin.compare_exchange_strong(expected, kClaimed, std::memory_order_acq_rel)) continue;
    g_slots[i].faulted.store(false, std::memory_order_relaxed);
    g_slots[i].end.store(reinterpret_cast<uintptr_t>(addr) + length, std::memory_order_release);
    g_slots[i].begin.store(reinterpret_cast<uintptr_t>(addr), std::memory_order_release);
    int used = g_slots_used.load(std::memory_order_acquire);
    while (used < i + 1 && !g_slots_used.compare_exchange_weak(used, i + 1, std::memory_order_acq_rel)) {
    }
    slot_ = i;
    return;
  }
}

MappingGuard::~MappingGuard() {
  if (slot_ < 0) return;
  Slot& s = g_slots[slot_];
  s.begin.store(kClaimed, std::memory_order_release);
  s.end.store(0, std::memory_order_release);
  s.begin.store(0, std::memory_order_release);
}

bool MappingGuard::faulted() const { return slot_ >= 0 && g_slots[slot_].faulted.load(std::memory_order_acquire); }

}  // namespace fp8kit::io
