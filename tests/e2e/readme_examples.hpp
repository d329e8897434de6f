#pragma once
// The README's checked examples, in the spirit of SimGrid's tesh: a command and the output it
// prints, side by side in the Markdown, so the README cannot drift from the program.
//
// Two forms mark an example:
// - in a fenced block, a line starting with "$ " is a command (a line ending in '\' continues
//   it on the next line); the lines after it, up to the next command or the end of the block,
//   are what it prints;
// - a line "<!-- $ COMMAND -->" makes the block that follows it (a fenced block, or the next
//   paragraph, such as a Markdown table trainsim printed) the output of COMMAND.
// A command is run by the shell, stdout and stderr together (without a long run's progress
// lines, which depend on timing), in a scratch folder where
// scenarios/, models/ and platforms/ are the project's (so relative paths resolve and outputs
// stay out of the repository), with trainsim first on PATH; the commands of one block run one
// after the other in the same folder (a sweep, then a look at its CSV). The output must equal the block line
// for line, except that a line "..." stands for any number of lines (for what varies from run to
// run, such as a sweep's progress lines).
#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace trainsim::readme {

struct Example {
  std::size_t command_line = 0;       // 1-based line of the command in the Markdown file
  std::size_t block = 0;              // examples of the same block share their scratch folder
  std::string command;                // as the shell reads it (continuation lines kept)
  std::size_t output_begin = 0;       // the expected lines are lines [output_begin, output_end)
  std::size_t output_end = 0;         // of the file, 0-based
  std::vector<std::string> expected;
};

inline constexpr const char* any_lines = "...";

std::vector<std::string> split_lines(const std::string& text);
std::vector<Example> find_examples(const std::vector<std::string>& markdown_lines);
// Whether `actual` is `expected`, where each `any_lines` line of `expected` matches any number of lines.
bool matches(const std::vector<std::string>& expected, const std::vector<std::string>& actual);
// The first line where they differ, as "line N: expected '...', got '...'" ("" when they match).
std::string first_difference(const std::vector<std::string>& expected, const std::vector<std::string>& actual);
// What the block of an example should hold given the output: `expected` itself when it matches;
// else the output, keeping a single elision: as many lines before and after it as `expected` had.
std::vector<std::string> regenerated(const std::vector<std::string>& expected, const std::vector<std::string>& actual);

// Empties `scratch` and prepares it for commands: links to the project's input folders, and
// `trainsim` (the binary to test) first on PATH.
void prepare_scratch(const std::filesystem::path& scratch, const std::filesystem::path& project,
                     const std::filesystem::path& trainsim);
// Runs `command` in a prepared `scratch` and returns its output lines.
std::vector<std::string> run_example(const std::string& command, const std::filesystem::path& scratch);
// Runs every example in order, each block in a freshly prepared scratch folder: their outputs.
std::vector<std::vector<std::string>> run_examples(const std::vector<Example>& examples,
                                                   const std::filesystem::path& scratch,
                                                   const std::filesystem::path& project,
                                                   const std::filesystem::path& trainsim);

} // namespace trainsim::readme
