// update_readme PROJECT TRAINSIM: reruns every checked example of PROJECT/README.md with the
// TRAINSIM binary and writes what it printed into the example's block (scripts/update-readme.sh).
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <unistd.h>

#include "readme_examples.hpp"

namespace fs = std::filesystem;
using namespace trainsim::readme;

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: update_readme PROJECT_DIR TRAINSIM_BINARY\n";
    return 2;
  }
  const fs::path project = argv[1];
  const fs::path readme = project / "README.md";
  std::ifstream in(readme, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  std::vector<std::string> lines = split_lines(text.str());
  const std::vector<Example> examples = find_examples(lines);

  const fs::path scratch = fs::temp_directory_path() / ("update-readme-" + std::to_string(::getpid()));
  const std::vector<std::vector<std::string>> outputs = run_examples(examples, scratch, project, argv[2]);
  std::size_t changed = 0;
  // From the last example up, so that a block changing length leaves the positions above it valid.
  for (std::size_t i = examples.size(); i-- > 0;) {
    const Example& example = examples[i];
    const std::vector<std::string> block = regenerated(example.expected, outputs[i]);
    if (block == example.expected)
      continue;
    ++changed;
    std::cout << "README.md:" << example.command_line << ": $ " << example.command << "\n  "
              << first_difference(example.expected, outputs[i]) << "\n";
    lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(example.output_begin),
                lines.begin() + static_cast<std::ptrdiff_t>(example.output_end));
    lines.insert(lines.begin() + static_cast<std::ptrdiff_t>(example.output_begin), block.begin(), block.end());
  }
  fs::remove_all(scratch);

  std::ofstream out(readme.string() + ".tmp", std::ios::binary);
  for (const std::string& line : lines)
    out << line << "\n";
  out.close();
  if (!out) {
    std::cerr << "update_readme: cannot write " << readme.string() << ".tmp\n";
    return 1;
  }
  fs::rename(readme.string() + ".tmp", readme);
  std::cout << examples.size() << " examples, " << changed << " block(s) rewritten\n";
  return 0;
}
