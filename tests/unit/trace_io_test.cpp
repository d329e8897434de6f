#include <doctest/doctest.h>

#include <fstream>
#include <set>

#include "common/error.hpp"
#include "program/workload_builder.hpp"
#include "program/trace_io.hpp"
#include "test_support.hpp"

using namespace trainsim;
namespace fs = std::filesystem;

namespace {

using test::fresh_dir;

void write(const fs::path& file, const std::string& content) { std::ofstream(file) << content; }

std::string error_of(const fs::path& dir) {
  try {
    read_trace(dir);
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("the trace was accepted");
  return "";
}

const char* const workload_txt = "format 1\nranks 2\ngroup g0 dp 0-1\nprogram p.trace 0-1\n";

} // namespace

TEST_CASE("a built workload survives writing and reading back") {
  const auto file = test::write_temp_file("trace.ini", R"([model]
name = tiny-llama
[platform]
file = dgx-a100.xml
[parallel]
dp = 4
[training]
seq_len = 128
global_batch = 8
)");
  const Scenario scenario = load_scenario(file, {});
  const Workload original = build_workload(scenario, load_model(scenario.model_file, 128), 0).workload;
  const fs::path dir = fresh_dir("roundtrip");
  write_trace(original, dir);
  const Workload copy = read_trace(dir);
  REQUIRE(copy.ranks() == original.ranks());
  CHECK(copy.programs[0] == copy.programs[3]);  // identical replicas share one program file
  CHECK(copy.step.tokens_per_step == original.step.tokens_per_step);
  CHECK(copy.step.model_flops_per_step == original.step.model_flops_per_step);
  CHECK(copy.groups.size() == original.groups.size());
  const auto& a = original.program(0).ops;
  const auto& b = copy.program(0).ops;
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    CAPTURE(i);
    CHECK(a[i].kind == b[i].kind);
    CHECK(a[i].stream == b[i].stream);
    CHECK(a[i].deps == b[i].deps);
    CHECK(a[i].name == b[i].name);
    CHECK(a[i].flops == b[i].flops);
    CHECK(a[i].bytes == b[i].bytes);
    CHECK(a[i].tensor == b[i].tensor);
    if (a[i].kind == OpKind::collective)
      CHECK(original.group_of(0, a[i].group) == copy.group_of(0, b[i].group));
  }
}

TEST_CASE("pipeline ranks sharing a program are written with their own peers and groups") {
  const Scenario scenario = load_scenario(test::write_temp_file("pipeline-trace.ini", test::tiny_scenario_ini),
                                          {"parallel.dp=2", "parallel.pp=2", "training.global_batch=8"});
  const Workload original = build_workload(scenario, load_model(scenario.model_file, 128), 0).workload;
  REQUIRE(original.programs[0] == original.programs[1]);  // one program per stage
  const fs::path dir = fresh_dir("pipeline-roundtrip");
  write_trace(original, dir);
  const Workload copy = read_trace(dir);
  for (std::size_t rank = 0; rank < original.ranks(); ++rank) {
    CAPTURE(rank);
    const auto& a = original.program(rank).ops;
    const auto& b = copy.program(rank).ops;
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (a[i].kind == OpKind::send || a[i].kind == OpKind::recv)
        CHECK(original.peer_of(rank, a[i].peer) == copy.peer_of(rank, b[i].peer));
      if (a[i].kind == OpKind::collective)
        CHECK(original.groups[original.group_of(rank, a[i].group)].name ==
              copy.groups[copy.group_of(rank, b[i].group)].name);
    }
  }
}

TEST_CASE("a hand-written trace with every op kind is read") {
  const fs::path dir = fresh_dir("handwritten");
  write(dir / "workload.txt", workload_txt);
  write(dir / "p.trace", R"(# a comment
0 alloc tensor=x category=activations bytes=1e6
1 compute name=fwd flops=1e12 bytes=1e9
2 collective op=allreduce group=g0 bytes=4e6 deps=1
3 copy target=cpu0 bytes=1e6 stream=copy
4 read target=nvme0 bytes=1e6
5 free tensor=x
)");
  const Workload workload = read_trace(dir);
  const auto& ops = workload.program(1).ops;
  REQUIRE(ops.size() == 6);
  CHECK(ops[1].flops == 1e12);
  CHECK(ops[2].stream == Stream::dp_comm);  // default stream of a collective
  CHECK(ops[2].deps == std::vector<OpId>{1});
  CHECK(ops[4].stream == Stream::io_read);
  CHECK(ops[0].device == Device::gpu);
}

TEST_CASE("trace errors name the file and line") {
  const fs::path dir = fresh_dir("errors");
  write(dir / "workload.txt", workload_txt);
  write(dir / "p.trace", "0 compute flops=1\n1 fly bytes=2\n");
  CHECK(error_of(dir).find("p.trace:2: unknown op kind 'fly'") != std::string::npos);
  write(dir / "p.trace", "0 compute flops=-1\n");
  CHECK(error_of(dir).find("p.trace:1") != std::string::npos);
  write(dir / "p.trace", "0 compute flops=1 deps=0\n");
  CHECK(error_of(dir).find("earlier op") != std::string::npos);
  write(dir / "p.trace", "0 collective op=allreduce group=nope bytes=1\n");
  CHECK(error_of(dir).find("not declared") != std::string::npos);
  write(dir / "p.trace", "0 compute flops=1 colour=red\n");
  CHECK(error_of(dir).find("unknown field 'colour'") != std::string::npos);
  write(dir / "p.trace", "5 compute flops=1\n");
  CHECK(error_of(dir).find("expected op id 0") != std::string::npos);
  write(dir / "p.trace", "0 free tensor=never\n");
  CHECK(error_of(dir).find("not allocated") != std::string::npos);
  write(dir / "workload.txt", "format 1\nranks 2\nprogram p.trace 0\n");
  write(dir / "p.trace", "0 compute flops=1\n");
  CHECK(error_of(dir).find("rank 1 has no program") != std::string::npos);
  write(dir / "workload.txt", "format 2\n");
  CHECK(error_of(dir).find("format 2 is not supported") != std::string::npos);
  CHECK(error_of(dir / "missing").find("cannot read") != std::string::npos);
}

TEST_CASE("copies go either way and compute may run on a host, and both survive writing and reading") {
  const fs::path dir = fresh_dir("offload_ops");
  write(dir / "workload.txt", workload_txt);
  write(dir / "p.trace", "0 copy target=cpu0 bytes=1e6\n1 copy source=cpu0 bytes=2e6\n"
                         "2 compute name=adam flops=1e12 bytes=1e9 phase=optimizer host=cpu0\n");
  const Workload workload = read_trace(dir);
  const auto& ops = workload.program(0).ops;
  REQUIRE(ops.size() == 3);
  CHECK_FALSE(ops[0].inbound);
  CHECK(ops[1].inbound);
  CHECK(ops[1].target == "cpu0");
  CHECK(ops[2].target == "cpu0");
  const fs::path copy = fresh_dir("offload_ops_copy");
  write_trace(workload, copy);
  const Workload read_back = read_trace(copy);
  const auto& back = read_back.program(0).ops;
  CHECK(back[1].inbound);
  CHECK(back[2].target == "cpu0");

  write(dir / "p.trace", "0 copy target=cpu0 source=cpu1 bytes=1e6\n");
  CHECK(error_of(dir).find("a copy needs target=HOST (from the GPU) or source=HOST (to the GPU), one of them") !=
        std::string::npos);
}

namespace {

// Each of the `count` values of an enum is read back from its name, and no two share one.
template <typename Enum>
void names_read_back(int count) {
  std::set<std::string> names;
  for (int i = 0; i < count; ++i) {
    const auto value = static_cast<Enum>(i);
    CAPTURE(to_string(value));
    CHECK(from_name<Enum>(to_string(value)) == value);
    CHECK(names.insert(to_string(value)).second);
  }
  CHECK_FALSE(from_name<Enum>("?").has_value());
}

} // namespace

TEST_CASE("every op kind, stream, collective, category, device and phase is read back from its name") {
  names_read_back<OpKind>(9);  // compute, collective, send, recv, copy, read, write, alloc, free
  names_read_back<Stream>(11);
  names_read_back<Collective>(5);
  names_read_back<MemCategory>(5);
  names_read_back<Device>(3);
  names_read_back<Phase>(5);
  CHECK(names_of<Device>() == "gpu, host, nvme");
  CHECK(from_name<Stream>("io-write") == Stream::io_write);
  CHECK(from_name<Collective>("reducescatter") == Collective::reduce_scatter);
}
