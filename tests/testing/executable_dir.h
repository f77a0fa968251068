// ExecutableDir: the directory of the running executable. Every executable
// of a build directory (backfilld, backfillctl, the test binaries and the
// harnesses) is written to its bin/, so a test finds the binaries of its own
// build beside itself. Read from /proc/self/exe rather than compiled in, so
// that the tests' objects name no build directory and compile alike in every
// build directory: one compiler cache entry serves the optimised and the
// sanitizer build (scripts/test.sh).
//
// Thread-safe: computed once, on first use.

#ifndef BACKFILL_TESTS_TESTING_EXECUTABLE_DIR_H_
#define BACKFILL_TESTS_TESTING_EXECUTABLE_DIR_H_

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <system_error>

namespace backfill::testing {

inline const std::string& ExecutableDir() {
  static const std::string* const dir = [] {
    std::error_code error;
    const std::filesystem::path self =
        std::filesystem::read_symlink("/proc/self/exe", error);
    if (error) {
      std::cerr << "cannot read /proc/self/exe: " << error.message()
                << std::endl;
      std::abort();
    }
    return new std::string(self.parent_path().string());
  }();
  return *dir;
}

}  // namespace backfill::testing

#endif  // BACKFILL_TESTS_TESTING_EXECUTABLE_DIR_H_
