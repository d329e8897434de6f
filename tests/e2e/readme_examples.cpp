#include "readme_examples.hpp"
#include "sanitizer_notes.hpp"

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace fs = std::filesystem;

namespace trainsim::readme {

namespace {

const std::string command_prompt = "$ ";
const std::string comment_open = "<!-- $ ";
const std::string comment_close = " -->";

bool starts_with(const std::string& text, const std::string& prefix) { return text.rfind(prefix, 0) == 0; }
bool is_fence(const std::string& line) { return starts_with(line, "```"); }
bool continues(const std::string& line) { return !line.empty() && line.back() == '\\'; }

// The command starting at `lines[i]` (without its prompt), with its continuation lines; `i` is left
// on its last line.
std::string read_command(const std::vector<std::string>& lines, std::size_t& i) {
  std::string command = lines[i].substr(command_prompt.size());
  while (continues(lines[i]) && i + 1 < lines.size())
    command += "\n" + lines[++i];
  return command;
}

// The commands and their outputs in the fenced block opening at `lines[open]`; returns the line after it.
std::size_t read_fenced_block(const std::vector<std::string>& lines, std::size_t open, std::vector<Example>& examples) {
  std::size_t i = open + 1;
  for (; i < lines.size() && !is_fence(lines[i]); ++i) {
    if (starts_with(lines[i], command_prompt)) {
      Example example;
      example.command_line = i + 1;
      example.command = read_command(lines, i);
      example.output_begin = i + 1;
      examples.push_back(example);
    } else if (!examples.empty()) {
      examples.back().expected.push_back(lines[i]);
    }
  }
  for (Example& example : examples)
    example.output_end = example.output_begin + example.expected.size();
  return i + 1;
}

// The block after a "<!-- $ COMMAND -->" line at `lines[mark]`: a fenced block, else the next paragraph.
Example read_marked_block(const std::vector<std::string>& lines, std::size_t mark) {
  const std::string& line = lines[mark];
  Example example;
  example.command_line = mark + 1;
  example.command = line.substr(comment_open.size(), line.size() - comment_open.size() - comment_close.size());
  std::size_t i = mark + 1;
  while (i < lines.size() && lines[i].empty())
    ++i;
  if (i == lines.size())
    throw std::runtime_error("README line " + std::to_string(mark + 1) + ": a checked command with no block after it");
  const bool fenced = is_fence(lines[i]);
  example.output_begin = fenced ? i + 1 : i;
  std::size_t end = example.output_begin;
  while (end < lines.size() && (fenced ? !is_fence(lines[end]) : !lines[end].empty()))
    ++end;
  example.output_end = end;
  example.expected.assign(lines.begin() + static_cast<std::ptrdiff_t>(example.output_begin),
                          lines.begin() + static_cast<std::ptrdiff_t>(end));
  return example;
}

std::size_t elisions(const std::vector<std::string>& expected) {
  return static_cast<std::size_t>(std::count(expected.begin(), expected.end(), any_lines));
}

bool matches_from(const std::vector<std::string>& expected, std::size_t e, const std::vector<std::string>& actual,
                  std::size_t a) {
  if (e == expected.size())
    return a == actual.size();
  if (expected[e] == any_lines) {
    for (std::size_t skip = a; skip <= actual.size(); ++skip)
      if (matches_from(expected, e + 1, actual, skip))
        return true;
    return false;
  }
  return a < actual.size() && expected[e] == actual[a] && matches_from(expected, e + 1, actual, a + 1);
}

std::string shown(const std::vector<std::string>& lines, std::size_t i) {
  return i < lines.size() ? "'" + lines[i] + "'" : "(no line)";
}

} // namespace

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

std::vector<Example> find_examples(const std::vector<std::string>& lines) {
  std::vector<Example> examples;
  for (std::size_t i = 0; i < lines.size();) {
    if (is_fence(lines[i])) {
      std::vector<Example> found;
      const std::size_t open = i;
      i = read_fenced_block(lines, i, found);
      for (Example& example : found)
        example.block = open;
      examples.insert(examples.end(), found.begin(), found.end());
    } else if (starts_with(lines[i], comment_open) && lines[i].size() >= comment_open.size() + comment_close.size() &&
               lines[i].compare(lines[i].size() - comment_close.size(), comment_close.size(), comment_close) == 0) {
      examples.push_back(read_marked_block(lines, i));
      examples.back().block = i;
      i = examples.back().output_end + 1;
    } else {
      ++i;
    }
  }
  return examples;
}

bool matches(const std::vector<std::string>& expected, const std::vector<std::string>& actual) {
  return matches_from(expected, 0, actual, 0);
}

std::string first_difference(const std::vector<std::string>& expected, const std::vector<std::string>& actual) {
  if (matches(expected, actual))
    return "";
  // Without an elision, line by line; with one, the lines before the first elision from the top
  // and the lines after the last one from the bottom.
  const auto first_elision = std::find(expected.begin(), expected.end(), any_lines);
  const std::size_t head = first_elision == expected.end() ? std::max(expected.size(), actual.size())
                                                           : static_cast<std::size_t>(first_elision - expected.begin());
  for (std::size_t i = 0; i < head; ++i)
    if (i >= expected.size() || i >= actual.size() || expected[i] != actual[i])
      return "line " + std::to_string(i + 1) + ": expected " + shown(expected, i) + ", got " + shown(actual, i);
  const std::size_t tail =
      static_cast<std::size_t>(std::find(expected.rbegin(), expected.rend(), any_lines) - expected.rbegin());
  for (std::size_t back = 1; back <= tail; ++back)
    if (back > actual.size() || expected[expected.size() - back] != actual[actual.size() - back])
      return std::to_string(back) + " line(s) from the end: expected '" + expected[expected.size() - back] +
             "', got " + (back > actual.size() ? "(no line)" : "'" + actual[actual.size() - back] + "'");
  return "the lines between the elisions differ";
}

std::vector<std::string> regenerated(const std::vector<std::string>& expected, const std::vector<std::string>& actual) {
  if (matches(expected, actual))
    return expected;
  if (elisions(expected) != 1)
    return actual;
  const auto elision = std::find(expected.begin(), expected.end(), any_lines);
  const std::size_t head = static_cast<std::size_t>(elision - expected.begin());
  const std::size_t tail = expected.size() - head - 1;
  if (head + tail > actual.size())
    return actual;
  std::vector<std::string> lines(actual.begin(), actual.begin() + static_cast<std::ptrdiff_t>(head));
  lines.push_back(any_lines);
  lines.insert(lines.end(), actual.end() - static_cast<std::ptrdiff_t>(tail), actual.end());
  return lines;
}

void prepare_scratch(const fs::path& scratch, const fs::path& project, const fs::path& trainsim) {
  fs::remove_all(scratch);
  fs::create_directories(scratch / "work");
  fs::create_directories(scratch / "bin");
  fs::create_symlink(fs::absolute(trainsim), scratch / "bin" / "trainsim");
  for (const char* inputs : {"scenarios", "models", "platforms"})
    fs::create_directory_symlink(fs::absolute(project / inputs), scratch / "work" / inputs);
}

std::vector<std::string> run_example(const std::string& command, const fs::path& scratch) {
  std::ofstream(scratch / "command.sh") << command << "\n";
  const std::string shell = "cd '" + (scratch / "work").string() + "' && PATH='" + (scratch / "bin").string() +
                            "':\"$PATH\" sh ../command.sh > ../output.txt 2>&1 < /dev/null";
  std::system(shell.c_str()); // the exit status shows in the output: an example that fails prints its error
  std::ifstream in(scratch / "output.txt", std::ios::binary);
  std::stringstream output;
  output << in.rdbuf();
  // A long run's progress lines depend on timing: left out.
  std::vector<std::string> lines;
  for (std::string& line : split_lines(test::without_sanitizer_notes(output.str())))
    if (line.rfind("trainsim: simulating, ", 0) != 0)
      lines.push_back(std::move(line));
  return lines;
}

std::vector<std::vector<std::string>> run_examples(const std::vector<Example>& examples, const fs::path& scratch,
                                                   const fs::path& project, const fs::path& trainsim) {
  std::vector<std::vector<std::string>> outputs;
  for (std::size_t i = 0; i < examples.size(); ++i) {
    if (i == 0 || examples[i].block != examples[i - 1].block)
      prepare_scratch(scratch, project, trainsim);
    outputs.push_back(run_example(examples[i].command, scratch));
  }
  return outputs;
}

} // namespace trainsim::readme
