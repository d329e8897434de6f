// The README's examples print what the README shows (readme_examples.hpp says how they are
// marked); scripts/update-readme.sh rewrites the blocks after an intended change.
#include <doctest/doctest.h>

#include "cli.hpp"
#include "readme_examples.hpp"

using namespace trainsim::readme;

TEST_CASE("README examples are found in fenced blocks and after a marking comment") {
  const std::vector<std::string> markdown = {
      "Prose.",                                         // 1
      "```",                                            // 2
      "$ trainsim a \\",                                // 3
      "    --more",                                     // 4
      "out a",                                          // 5
      "$ head -1 x.csv",                                // 6
      "row",                                            // 7
      "```",                                            // 8
      "```",                                            // 9
      "not checked",                                    // 10
      "```",                                            // 11
      "<!-- $ trainsim table -->",                      // 12
      "",                                               // 13
      "| a | b |",                                      // 14
      "|---|---|",                                      // 15
      "",                                               // 16
      "After.",                                         // 17
  };
  const std::vector<Example> examples = find_examples(markdown);
  REQUIRE(examples.size() == 3);
  CHECK(examples[0].command == "trainsim a \\\n    --more");
  CHECK(examples[0].command_line == 3);
  CHECK(examples[0].expected == std::vector<std::string>{"out a"});
  CHECK(examples[0].output_begin == 4);
  CHECK(examples[0].output_end == 5);
  CHECK(examples[1].command == "head -1 x.csv");
  CHECK(examples[1].expected == std::vector<std::string>{"row"});
  CHECK(examples[2].command == "trainsim table");
  CHECK(examples[2].expected == std::vector<std::string>{"| a | b |", "|---|---|"});
  CHECK(examples[2].output_begin == 13);
  CHECK(examples[2].output_end == 15);
}

TEST_CASE("an elision line matches any number of lines and nothing else does") {
  const std::vector<std::string> expected = {"first", any_lines, "last"};
  CHECK(matches(expected, {"first", "last"}));
  CHECK(matches(expected, {"first", "x", "y", "last"}));
  CHECK_FALSE(matches(expected, {"first", "x"}));
  CHECK_FALSE(matches({"a", "b"}, {"a", "b", "c"}));
  CHECK(first_difference({"a", "b"}, {"a", "c"}) == "line 2: expected 'b', got 'c'");
  CHECK(first_difference({"a"}, {"a", "c"}) == "line 2: expected (no line), got 'c'");
  CHECK(first_difference(expected, {"first", "x", "end"}) == "1 line(s) from the end: expected 'last', got 'end'");
  // Regenerating keeps the elision with as many lines around it as before.
  CHECK(regenerated(expected, {"first", "x", "y", "last"}) == expected);
  CHECK(regenerated(expected, {"new", "x", "y", "end"}) == std::vector<std::string>{"new", any_lines, "end"});
  CHECK(regenerated({"old"}, {"new", "lines"}) == std::vector<std::string>{"new", "lines"});
}

TEST_CASE("every README example prints what the README shows") {
  const std::filesystem::path project = TRAINSIM_SOURCE_DIR;
  const std::vector<Example> examples =
      find_examples(split_lines(trainsim::test::read_file(project / "README.md")));
  // The README shows runs, memory tables, a sweep, a plan and a platform: losing the marks would
  // silently check nothing.
  CHECK(examples.size() >= 10);
  const std::vector<std::vector<std::string>> outputs =
      run_examples(examples, trainsim::test::fresh_dir("readme"), project, TRAINSIM_BINARY);
  for (std::size_t i = 0; i < examples.size(); ++i)
    CHECK_MESSAGE(matches(examples[i].expected, outputs[i]),
                  "README.md:" << examples[i].command_line << ": $ " << examples[i].command << "\n"
                               << first_difference(examples[i].expected, outputs[i])
                               << "\n(bash scripts/update-readme.sh rewrites the README's blocks)");
}
