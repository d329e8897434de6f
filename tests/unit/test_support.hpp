#pragma once
// Helpers shared by the unit tests: temporary files and the project's data.
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <doctest/doctest.h>

namespace trainsim::test {

inline std::filesystem::path source_dir() { return TRAINSIM_SOURCE_DIR; }

// The folder of this test process: ctest runs test cases in parallel processes.
inline std::filesystem::path temp_dir() {
  return std::filesystem::path(TRAINSIM_TEST_TMP) / "unit" / std::to_string(::getpid());
}

// A file under this process's test folder.
inline std::filesystem::path write_temp_file(const std::string& name, const std::string& content) {
  const std::filesystem::path dir = temp_dir();
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / name;
  std::ofstream(file) << content;
  return file;
}

} // namespace trainsim::test
