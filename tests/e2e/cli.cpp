#include "cli.hpp"
#include "sanitizer_notes.hpp"

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <sys/wait.h>

#include <boost/property_tree/xml_parser.hpp>
#include <doctest/doctest.h>

namespace fs = std::filesystem;

namespace trainsim::test {

fs::path fresh_dir(const std::string& name) {
  const fs::path dir = fs::path(TRAINSIM_TEST_TMP) / "e2e" / name;
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

std::string read_file(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

nlohmann::json read_json(const fs::path& file) { return nlohmann::json::parse(read_file(file)); }

std::vector<std::vector<double>> memory_rows(const fs::path& file, int rank, std::string* header) {
  std::istringstream csv(read_file(file));
  std::string line;
  std::getline(csv, line);
  if (header)
    *header = line;
  std::vector<std::vector<double>> rows;
  const std::string prefix = std::to_string(rank) + ",";
  while (std::getline(csv, line)) {
    if (line.rfind(prefix, 0) != 0)
      continue;
    std::istringstream cells(line.substr(prefix.size()));
    std::vector<double> row;
    for (std::string cell; std::getline(cells, cell, ',');)
      row.push_back(std::stod(cell));
    rows.push_back(std::move(row));
  }
  return rows;
}

std::string project_file(const std::string& relative) { return (fs::path(TRAINSIM_SOURCE_DIR) / relative).string(); }

CliResult run_trainsim(const std::string& name, const std::string& arguments, const std::string& limits) {
  CliResult result;
  result.dir = fresh_dir(name);
  const std::string command = "cd '" + result.dir.string() + "' && " + (limits.empty() ? "" : limits + " && ") +
                              "'" + TRAINSIM_BINARY + "' " + arguments + " > stdout.txt 2> stderr.txt < /dev/null";
  const int raw = std::system(command.c_str());
  result.status = WIFEXITED(raw) ? WEXITSTATUS(raw) : 128 + WTERMSIG(raw);
  result.out = read_file(result.dir / "stdout.txt");
  result.err = without_sanitizer_notes(read_file(result.dir / "stderr.txt"));
  return result;
}

namespace {

void collect(const boost::property_tree::ptree& tree, const std::string& name,
             std::vector<const boost::property_tree::ptree*>& found) {
  for (const auto& [key, child] : tree) {
    if (key == name)
      found.push_back(&child);
    collect(child, name, found);
  }
}

} // namespace

boost::property_tree::ptree xml_tree(const std::filesystem::path& file) {
  boost::property_tree::ptree tree;
  std::istringstream in(read_file(file));
  REQUIRE_NOTHROW(boost::property_tree::read_xml(in, tree));
  return tree;
}

std::vector<const boost::property_tree::ptree*> xml_elements(const boost::property_tree::ptree& tree,
                                                             const std::string& name) {
  std::vector<const boost::property_tree::ptree*> found;
  collect(tree, name, found);
  return found;
}

std::string xml_attribute(const boost::property_tree::ptree& element, const std::string& name) {
  return element.get<std::string>("<xmlattr>." + name, "");
}

nlohmann::json run_summary(const std::string& name, const std::string& arguments) {
  const CliResult result = run_trainsim(name, "run " + arguments + " --out out");
  REQUIRE_MESSAGE(result.status == 0, result.err);
  return read_json(result.dir / "out/summary.json");
}

double model_state_bytes(const nlohmann::json& rank) {
  return rank["model_states"]["weights"].get<double>() + rank["model_states"]["gradients"].get<double>() +
         rank["model_states"]["optimizer"].get<double>();
}

} // namespace trainsim::test
