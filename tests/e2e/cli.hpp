#pragma once
// Runs the trainsim binary as a separate process (one simulation per process)
// from a fresh working folder and captures what it printed.
#include <filesystem>
#include <string>

#include <nlohmann/json.hpp>

namespace trainsim::test {

struct CliResult {
  int status = -1;
  std::string out;
  std::string err;
  std::filesystem::path dir;   // the working folder the command ran in
};

// A fresh, empty folder named after the test.
std::filesystem::path fresh_dir(const std::string& name);
// Runs `trainsim <arguments>` inside a fresh folder named `name`.
CliResult run_trainsim(const std::string& name, const std::string& arguments);
std::string read_file(const std::filesystem::path& file);
nlohmann::json read_json(const std::filesystem::path& file);
// A project file: scenarios/default.ini, tests/fixtures/..., platforms/...
std::string project_file(const std::string& relative);

} // namespace trainsim::test
