// handle_interrupts (interrupt.h).
#include "interrupt.h"

#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <system_error>
#include <thread>

#include "convert/output_directory.h"
#include "fp8kit/log.h"

namespace fp8kit::cli {
namespace {

sigset_t interrupt_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGHUP);
  return set;
}

[[noreturn]] void wait_for_interrupt(sigset_t set) {
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  const std::vector<std::string> removed = convert::OutputDirectory::abandon_all();
  std::string message = std::string("\nfp8kit: interrupted (SIG") + sigabbrev_np(sig) + ")";
  for (const std::string& dir : removed) message += "; removed the unfinished output " + dir;
  message += "\n";
  ssize_t ignored = ::write(STDERR_FILENO, message.data(), message.size());
  (void)ignored;
  ::_exit(128 + sig);
}

}  // namespace

void handle_interrupts() {
  const sigset_t set = interrupt_signals();
  sigset_t previous;
  pthread_sigmask(SIG_BLOCK, &set, &previous);
  try {
    std::thread(wait_for_interrupt, set).detach();
  } catch (const std::system_error& e) {
    // No thread to be had (a process limit, or a stack that cannot be mapped): the signals keep
    // their default action. An interrupt then ends the run at once, like kill -9, and leaves its
    // marked work directory, which the next run to the same output removes.
    pthread_sigmask(SIG_SETMASK, &previous, nullptr);
    log_warning(std::string("cannot start the interrupt thread (") + e.what() +
                "): an interrupt leaves the unfinished output, which the next run to it removes");
  }
}

}  // namespace fp8kit::cli
