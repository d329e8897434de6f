// Sweep expansion, sharding and result rows.
#include <doctest/doctest.h>

#include <fstream>
#include <set>

#include "common/error.hpp"
#include "sweep/sweep.hpp"
#include "test_support.hpp"

using namespace trainsim;

TEST_CASE("the product of the varied keys, the last varying fastest") {
  const auto configs = expand({parse_variation("parallel.dp=1,2"), parse_variation("memory.zero=0,1,3")});
  REQUIRE(configs.size() == 6);
  CHECK(configs[0].label() == "parallel.dp=1 memory.zero=0");
  CHECK(configs[1].label() == "parallel.dp=1 memory.zero=1");
  CHECK(configs[3].label() == "parallel.dp=2 memory.zero=0");
  CHECK(configs[5].label() == "parallel.dp=2 memory.zero=3");
  std::set<std::string> labels;
  for (const auto& config : configs)
    labels.insert(config.label());
  CHECK(labels.size() == 6);
}

TEST_CASE("shards cover every configuration exactly once") {
  const auto configs = expand({parse_variation("a.x=1,2,3,4,5"), parse_variation("b.y=1,2,3")});
  for (int count : {1, 2, 4, 7, 20}) {
    CAPTURE(count);
    std::vector<int> owners(configs.size(), 0);
    for (int k = 1; k <= count; ++k) {
      const Shard shard = parse_shard(std::to_string(k) + "/" + std::to_string(count));
      for (const auto& config : configs)
        owners[config.index] += shard.holds(config.index);
    }
    CHECK(std::all_of(owners.begin(), owners.end(), [](int n) { return n == 1; }));
  }
}

TEST_CASE("bad sweep options are refused with what is accepted") {
  CHECK_THROWS_WITH_AS(parse_variation("dp=1,2"), doctest::Contains("expected section.key=value1,value2"), InputError);
  CHECK_THROWS_WITH_AS(parse_variation("parallel.dp=1,,2"), doctest::Contains("an empty value"), InputError);
  CHECK_THROWS_WITH_AS(parse_variation("parallel.dp=1,1"), doctest::Contains("listed twice"), InputError);
  CHECK_THROWS_WITH_AS(expand({parse_variation("a.b=1"), parse_variation("a.b=2")}), doctest::Contains("given twice"),
                       InputError);
  for (const char* bad : {"0/3", "4/3", "1/0", "x/2", "1"})
    CHECK_THROWS_WITH_AS(parse_shard(bad), doctest::Contains("expected K/N"), InputError);
}

TEST_CASE("rows survive JSON-lines and quote their CSV fields") {
  SweepRow row;
  row.index = 7;
  row.settings = {{"parallel.dp", "8"}, {"parallel.layers_per_stage", "10,12"}};
  row.status = "invalid";
  row.reason = "a reason, with \"quotes\"";
  const SweepRow back = row_from_json(to_json(row));
  CHECK(back.label() == row.label());
  CHECK(back.reason == row.reason);
  CHECK(csv_line(row) == "7,invalid,8,\"10,12\",,,,,,,,\"a reason, with \"\"quotes\"\"\"\n");
  CHECK(csv_header(row.settings) ==
        "index,status,parallel.dp,parallel.layers_per_stage,step_time_s,tokens_per_s,mfu,peak_bytes,capacity_bytes,fits,"
        "bottleneck,reason\n");
}

TEST_CASE("a results file cut short by a kill keeps its whole rows") {
  SweepRow row;
  row.settings = {{"parallel.dp", "2"}};
  row.status = "ok";
  row.fits = true;
  const auto file = test::write_temp_file("cut.jsonl", to_json(row).dump() + "\n" + to_json(row).dump().substr(0, 20));
  CHECK(read_rows(file).size() == 1);
  std::ofstream(file) << "not json\n" << to_json(row).dump() << "\n";
  CHECK_THROWS_WITH_AS(read_rows(file), doctest::Contains("cut.jsonl:1: not a sweep result row"), InputError);
}
