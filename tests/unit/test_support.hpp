#pragma once
// Helpers shared by the unit tests: temporary files, the project's data, ops by name.
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <doctest/doctest.h>

#include "program/program.hpp"

namespace trainsim::test {

inline std::filesystem::path source_dir() { return TRAINSIM_SOURCE_DIR; }

// The folder of this test process: ctest runs test cases in parallel processes.
inline std::filesystem::path temp_dir() {
  return std::filesystem::path(TRAINSIM_TEST_TMP) / "unit" / std::to_string(::getpid());
}

// An empty folder under this process's test folder.
inline std::filesystem::path fresh_dir(const std::string& name) {
  const std::filesystem::path dir = temp_dir() / name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// A file under this process's test folder.
inline std::filesystem::path write_temp_file(const std::string& name, const std::string& content) {
  const std::filesystem::path dir = temp_dir();
  std::filesystem::create_directories(dir);
  const std::filesystem::path file = dir / name;
  std::ofstream(file) << content;
  return file;
}

// A small data-parallel scenario: tiny GPT, 4 ranks on two DGX A100 nodes, 4 micro-batches.
// Tests vary it with --set style overrides. The scenario-loading tests count its lines.
inline const char* const tiny_scenario_ini = R"([model]
name = tiny-gpt

[platform]
file = dgx-a100-2n.xml

[parallel]
dp = 4

[training]
seq_len = 512
micro_batch = 2
global_batch = 32
)";

// The id of the op called `name` in a program; a failed check when there is none.
inline OpId op_id_named(const Program& program, const std::string& name) {
  for (OpId id = 0; id < program.ops.size(); ++id)
    if (program.ops[id].name == name)
      return id;
  FAIL("no op " << name);
  return 0;
}

inline const Op& op_named(const Program& program, const std::string& name) {
  return program.ops[op_id_named(program, name)];
}

} // namespace trainsim::test
