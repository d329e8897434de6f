#include <doctest/doctest.h>

#include "common/text.hpp"

using namespace trainsim;

TEST_CASE("natural order puts gpu2 before gpu10") {
  CHECK(natural_less("node0-gpu2", "node0-gpu10"));
  CHECK_FALSE(natural_less("node0-gpu10", "node0-gpu2"));
  CHECK(natural_less("node1-gpu7", "node10-gpu0"));
  CHECK_FALSE(natural_less("a", "a"));
}

TEST_CASE("rank lists round-trip through their compact form") {
  const std::vector<int> ranks = {0, 1, 2, 3, 8, 10, 11};
  CHECK(format_rank_list(ranks) == "0-3,8,10-11");
  CHECK(parse_rank_list("0-3,8,10-11") == ranks);
  CHECK_THROWS(parse_rank_list("3-1"));
  CHECK_THROWS(parse_rank_list("0-60008192"));  // found by fuzzing: 60M ranks would exhaust memory
  CHECK(parse_rank_list("0-999999").size() == 1'000'000);
  CHECK_THROWS(parse_rank_list("x"));
}

TEST_CASE("doubles are printed in their shortest exact form") {
  CHECK(format_double(0.1) == "0.1");
  CHECK(format_double(1235814400.0) == "1235814400");
  CHECK(std::stod(format_double(1.0 / 3.0)) == 1.0 / 3.0);
}

TEST_CASE("integers must be whole") {
  long long value = 0;
  CHECK(parse_integer(" 42 ", value));
  CHECK(value == 42);
  CHECK_FALSE(parse_integer("4.2", value));
  CHECK_FALSE(parse_integer("", value));
  CHECK_FALSE(parse_integer("12abc", value));
}

TEST_CASE("aligned columns are as wide as their widest cell, two spaces apart, without trailing blanks") {
  const std::string table = trainsim::aligned_columns({{"rank", "layout", "tokens/s"}, {"1", "dp=8 tp=8+sp", "4.94K"}},
                                                      {false, false, true});
  // "layout" is padded to the 12 characters of "dp=8 tp=8+sp"; "4.94K" right-aligned under "tokens/s".
  CHECK(table == "rank  layout        tokens/s\n"
                 "1     dp=8 tp=8+sp     4.94K\n");
}
