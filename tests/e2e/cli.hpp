#pragma once
// Runs the trainsim binary as a separate process (one simulation per process)
// from a fresh working folder and captures what it printed.
#include <filesystem>
#include <string>
#include <vector>

#include <boost/property_tree/ptree.hpp>
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
// Runs `trainsim <arguments>` inside a fresh folder named `name`; `limits` is a shell command run
// first in the same shell, e.g. "ulimit -v 250000".
CliResult run_trainsim(const std::string& name, const std::string& arguments, const std::string& limits = "");
std::string read_file(const std::filesystem::path& file);
nlohmann::json read_json(const std::filesystem::path& file);
// One rank's rows of a memory.csv: time_s then the bytes per category, in file order.
// `header` receives the first line.
std::vector<std::vector<double>> memory_rows(const std::filesystem::path& file, int rank, std::string* header = nullptr);
// An XML (SVG, XHTML) file read by Boost.PropertyTree's parser; the test fails if it does not parse.
boost::property_tree::ptree xml_tree(const std::filesystem::path& file);
// Every element named `name` under `tree`, depth first.
std::vector<const boost::property_tree::ptree*> xml_elements(const boost::property_tree::ptree& tree,
                                                             const std::string& name);
std::string xml_attribute(const boost::property_tree::ptree& element, const std::string& name);
// `trainsim run <arguments> --out out` in a fresh folder: its summary.json; the test stops if it failed.
nlohmann::json run_summary(const std::string& name, const std::string& arguments);
// Weights + gradients + optimizer of a rank entry of summary.json or memory.json.
double model_state_bytes(const nlohmann::json& rank);
// A project file: scenarios/default.ini, tests/fixtures/..., platforms/...
std::string project_file(const std::string& relative);

} // namespace trainsim::test
