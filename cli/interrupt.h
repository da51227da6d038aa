// Ctrl-C and kill (SIGINT, SIGTERM, SIGHUP) during a conversion: the run's work directory is
// removed and the process exits with 128 + the signal number, saying what it removed. The
// signals are blocked in every thread and taken by one thread of their own (sigwait), so the
// removal runs as ordinary code, never inside a signal handler. Where no thread can be started,
// the signals keep their default action, with a warning.
// Tested in tests/cpu/test_cli_output.cpp (CliOutput.InterruptRemovesTheWorkDirectory) and
// tests/cpu/test_cli.cpp (Cli.ThreadsThatCannotStartAreAWarningNotACrash).
#pragma once

namespace fp8kit::cli {

// Call first in main, before any other thread exists (threads inherit the blocked signals).
void handle_interrupts();

}  // namespace fp8kit::cli
