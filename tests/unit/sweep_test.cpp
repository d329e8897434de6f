// Sweep expansion, sharding and result rows.
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <sstream>
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

TEST_CASE("zipped keys vary together, as one dimension after the others") {
  // --vary parallel.tp=1,2 --zip platform.nodes=1,2,4 --zip training.global_batch=64,128,256:
  // 2 x 3 configurations, the nodes and the batch taking their i-th values together.
  const auto configs = expand({parse_variation("parallel.tp=1,2"), parse_variation("platform.nodes=1,2,4", "--zip"),
                               parse_variation("training.global_batch=64,128,256", "--zip")});
  REQUIRE(configs.size() == 6);
  CHECK(configs[0].label() == "parallel.tp=1 platform.nodes=1 training.global_batch=64");
  CHECK(configs[2].label() == "parallel.tp=1 platform.nodes=4 training.global_batch=256");
  CHECK(configs[3].label() == "parallel.tp=2 platform.nodes=1 training.global_batch=64");
  CHECK(configs[5].label() == "parallel.tp=2 platform.nodes=4 training.global_batch=256");
  CHECK_THROWS_WITH_AS(expand({parse_variation("a.x=1,2", "--zip"), parse_variation("b.y=1,2,3", "--zip")}),
                       doctest::Contains("--zip b.y has 3 values and --zip a.x 2"), InputError);
  CHECK_THROWS_WITH_AS(parse_variation("a.x", "--zip"), doctest::Contains("--zip a.x: expected"), InputError);
  // A zipped key may repeat a value: its partner tells them apart.
  CHECK(expand({parse_variation("a.x=1,1", "--zip"), parse_variation("b.y=1,2", "--zip")}).size() == 2);
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
  CHECK(csv_line(row) == "7,invalid,8,\"10,12\",,,,,,,,,\"a reason, with \"\"quotes\"\"\"\n");
  CHECK(csv_header(keys_of(row.settings)) ==
        "index,status,parallel.dp,parallel.layers_per_stage,step_time_s,tokens_per_s,mfu,peak_bytes,reserve_bytes,"
        "capacity_bytes,fits,bottleneck,reason\n");
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

TEST_CASE("the CSV header names the varied keys before any row exists") {
  // A sweep writes its header before its first row: it must come from --vary, not from a row.
  const std::vector<Variation> varied = {parse_variation("parallel.dp=2,4"), parse_variation("memory.zero=0,1")};
  const std::string header = csv_header(keys_of(varied));
  CHECK(header.rfind("index,status,parallel.dp,memory.zero,step_time_s,", 0) == 0);
  // 2 + 2 varied keys + 9 result columns, as many as a row has.
  CHECK(std::count(header.begin(), header.end(), ',') + 1 == 13);
  SweepRow row;
  row.settings = expand(varied)[0].settings;
  row.status = "invalid";
  const std::string line = csv_line(row);
  CHECK(std::count(line.begin(), line.end(), ',') + 1 == 13);
}

TEST_CASE("byte counts in the CSV are whole numbers at every size") {
  // H200: 141e9 bytes, whose shortest round-trip form is 1.41e+11; 80 GiB = 80 x 2^30 bytes.
  CHECK(csv_byte_count(141e9) == "141000000000");
  CHECK(csv_byte_count(80.0 * 1024 * 1024 * 1024) == "85899345920");
  CHECK(csv_byte_count(0) == "0");
  SweepRow row;
  row.settings = {{"platform.gpu", "h200"}};
  row.status = "ok";
  row.peak_bytes = 5e10;
  row.reserve_bytes = 4.0 * 1024 * 1024 * 1024;
  row.capacity_bytes = 141e9;
  CHECK(csv_line(row).find(",50000000000,4294967296,141000000000,") != std::string::npos);
}

namespace {

SweepRow row_of(const SweepConfig& config, const std::string& status) {
  SweepRow row;
  row.index = config.index;
  row.settings = config.settings;
  row.status = status;
  return row;
}

} // namespace

TEST_CASE("a resumed sweep reruns its failed rows and keeps the others") {
  const auto configs = expand({parse_variation("parallel.dp=1,2,4")});
  const auto kept = rows_to_keep({row_of(configs[0], "ok"), row_of(configs[1], "failed"), row_of(configs[2], "invalid")},
                                 configs, "s.jsonl");
  REQUIRE(kept.size() == 2);
  CHECK(kept[0].index == 0);
  CHECK(kept[1].index == 2);
  CHECK(kept[1].status == "invalid");
}

TEST_CASE("resuming with other --vary values is refused") {
  const auto before = expand({parse_variation("parallel.dp=1,2,4")});
  // Other values: configuration 1 was dp=2, now dp=8.
  CHECK_THROWS_WITH_AS(rows_to_keep({row_of(before[1], "ok")}, expand({parse_variation("parallel.dp=1,8")}), "s.jsonl"),
                       doctest::Contains("s.jsonl: configuration 1 is 'parallel.dp=2' there but 'parallel.dp=8' in this sweep"),
                       InputError);
  // Another key added: the same index, another label.
  CHECK_THROWS_AS(rows_to_keep({row_of(before[0], "ok")},
                               expand({parse_variation("parallel.dp=1,2,4"), parse_variation("memory.zero=0,1")}), "s.jsonl"),
                  InputError);
  // Fewer values: configuration 2 does not exist any more.
  CHECK_THROWS_WITH_AS(rows_to_keep({row_of(before[2], "ok")}, expand({parse_variation("parallel.dp=1,2")}), "s.jsonl"),
                       doctest::Contains("'parallel.dp=4' there but absent in this sweep"), InputError);
  CHECK_THROWS_WITH_AS(rows_to_keep({row_of(before[0], "ok"), row_of(before[0], "ok")}, before, "s.jsonl"),
                       doctest::Contains("configuration 0 has two rows"), InputError);
}

TEST_CASE("a row that cannot be appended (a full disk) is an error naming the file") {
  // /dev/full accepts the open and refuses every write with ENOSPC, as a full disk does.
  std::ofstream full("/dev/full");
  REQUIRE(full);
  std::ostringstream fine;
  SweepRow row;
  row.index = 3;
  row.status = "invalid";
  CHECK_THROWS_WITH_AS(append_row(fine, "s.csv", full, "s.jsonl", row),
                       doctest::Contains("s.jsonl: cannot append the result of configuration 3 (No space left on device)"),
                       InputError);
  CHECK(fine.str() == csv_line(row));
}

TEST_CASE("a result row whose index is beyond 64 bits is refused, not converted") {
  // 81111111111111111111111 does not fit an unsigned 64-bit integer: JSON reads it as a double,
  // and converting that to an index is undefined (the fuzzer found it).
  const std::string line = R"({"index":81111111111111111111111,"settings":[],"status":"invalid","reason":"r"})";
  CHECK_THROWS_AS(parse_rows(line + "\n", "rows.jsonl"), InputError);
  CHECK(parse_rows(R"({"index":7,"settings":[],"status":"invalid","reason":"r"})" "\n", "rows.jsonl").front().index == 7);
}
