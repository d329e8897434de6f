// Output files: all from one run or none, nothing left behind by a failed write.
#include <doctest/doctest.h>

#include <filesystem>
#include <iterator>

#include "common/error.hpp"
#include "common/files.hpp"
#include "test_support.hpp"

using namespace trainsim;
namespace fs = std::filesystem;

namespace {

std::string content_of(const fs::path& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A disk that is full for one file: its temporary name leads to /dev/full, which accepts the open
// and refuses every write with ENOSPC.
void fill_disk_for(const fs::path& file) { fs::create_symlink("/dev/full", file.string() + ".tmp"); }

} // namespace

TEST_CASE("a file that cannot be written leaves neither itself nor its temporary") {
  const fs::path dir = test::fresh_dir("atomic_full");
  fill_disk_for(dir / "a.json");
  CHECK_THROWS_WITH_AS(write_file_atomically(dir / "a.json", std::string(100000, 'x')),
                       doctest::Contains("a.json: write failed (No space left on device)"), InputError);
  CHECK(fs::is_empty(dir));
}

TEST_CASE("an output set replaces the previous run's files and removes those this run does not write") {
  const fs::path dir = test::fresh_dir("set_stale");
  std::ofstream(dir / "summary.json") << "old";
  std::ofstream(dir / "report.html") << "old";
  std::ofstream(dir / "notes.txt") << "the user's";
  OutputSet outputs(dir, {"summary.json", "report.html"});
  outputs.write("summary.json", "new");
  outputs.commit();
  CHECK(content_of(dir / "summary.json") == "new");
  CHECK_FALSE(fs::exists(dir / "report.html"));        // a known output this run did not write
  CHECK(content_of(dir / "notes.txt") == "the user's");  // not one of ours: left alone
  CHECK_FALSE(fs::exists(dir / "summary.json.tmp"));
}

TEST_CASE("an output set that fails part-way leaves none of its files and the previous run's intact") {
  const fs::path dir = test::fresh_dir("set_full");
  std::ofstream(dir / "summary.json") << "old";
  {
    OutputSet outputs(dir, {"memory.csv", "summary.json"});
    outputs.write("memory.csv", "new");
    fill_disk_for(dir / "summary.json");
    CHECK_THROWS_WITH_AS(outputs.write("summary.json", "new"), doctest::Contains("No space left on device"), InputError);
  }
  // Neither the new memory.csv (its partner could not be written) nor a temporary.
  CHECK_FALSE(fs::exists(dir / "memory.csv"));
  CHECK_FALSE(fs::exists(dir / "memory.csv.tmp"));
  CHECK_FALSE(fs::exists(dir / "summary.json.tmp"));
  CHECK(content_of(dir / "summary.json") == "old");
}
