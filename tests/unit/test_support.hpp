#pragma once
// Helpers shared by the unit tests: temporary files and the project's data.
#include <filesystem>
#include <fstream>
#include <string>

#include <doctest/doctest.h>

namespace trainsim::test {

inline std::filesystem::path source_dir() { return TRAINSIM_SOURCE_DIR; }

// A fresh file under the build tree's test folder, named after the test.
inline std::filesystem::path write_temp_file(const std::string& name, const std::string& content) {
  const std::filesystem::path dir = std::filesystem::path(TRAINSIM_TEST_TMP) / "unit";
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / name;
  std::ofstream(file) << content;
  return file;
}

} // namespace trainsim::test
