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
    CHECK(a[i].place == b[i].place);
    CHECK(a[i].kernel_set == b[i].kernel_set);
    if (a[i].kind == OpKind::collective)
      CHECK(original.group_of(0, a[i].group) == copy.group_of(0, b[i].group));
  }
  // The kernels behind the compute ops, and how they are timed, come back as they were.
  CHECK(copy.step.efficiency.model == ComputeModel::roofline);
  REQUIRE(copy.kernel_sets.size() == original.kernel_sets.size());
  for (std::size_t i = 0; i < original.kernel_sets.size(); ++i) {
    const KernelSet& x = original.kernel_sets[i];
    const KernelSet& y = copy.kernel_sets[i];
    CHECK(x.name == y.name);
    REQUIRE(x.kernels.size() == y.kernels.size());
    for (std::size_t k = 0; k < x.kernels.size(); ++k) {
      CAPTURE(x.kernels[k].name);
      CHECK(x.kernels[k].name == y.kernels[k].name);
      CHECK(x.kernels[k].kind == y.kernels[k].kind);
      CHECK(x.kernels[k].m == y.kernels[k].m);
      CHECK(x.kernels[k].n == y.kernels[k].n);
      CHECK(x.kernels[k].k == y.kernels[k].k);
      CHECK(x.kernels[k].batch == y.kernels[k].batch);
      CHECK(x.kernels[k].flops == y.kernels[k].flops);
      CHECK(x.kernels[k].bytes == y.kernels[k].bytes);
      CHECK(x.kernels[k].count == y.kernels[k].count);
    }
  }
}

TEST_CASE("a trace without a compute_model line is timed at its efficiencies, and kernel lines are checked") {
  const fs::path dir = fresh_dir("kernel_lines");
  write(dir / "workload.txt", "format 3\nranks 1\nprogram p.trace 0\n");
  write(dir / "p.trace", "0 compute flops=1\n");
  CHECK(read_trace(dir).step.efficiency.model == ComputeModel::roofline);
  write(dir / "workload.txt", "format 3\nranks 1\ncompute_model kernels\nkernel_set s\n"
                              "kernel qkv gemm m=8 n=8 k=8 batch=1 flops=1024 bytes=384\nkernel norm memory bytes=64\n"
                              "program p.trace 0\n");
  write(dir / "p.trace", "0 compute flops=1024 bytes=448 kernels=0\n");
  const Workload read = read_trace(dir);
  CHECK(read.step.efficiency.model == ComputeModel::kernels);
  REQUIRE(read.kernel_sets.size() == 1);
  CHECK(read.kernel_sets[0].kernels.size() == 2);
  CHECK(read.program(0).ops[0].kernel_set == 0);
  write(dir / "p.trace", "0 compute flops=1024 bytes=448 kernels=1\n");
  CHECK(error_of(dir).find("kernels=1 names no kernel set") != std::string::npos);
  write(dir / "workload.txt", "format 3\nranks 1\nkernel qkv gemm m=8 n=8 k=8 batch=1 flops=1 bytes=1\n");
  CHECK(error_of(dir).find("workload.txt:3: a kernel line comes after the kernel_set line") != std::string::npos);
  write(dir / "workload.txt", "format 3\nranks 1\nkernel_set s\nkernel qkv conv m=8\n");
  CHECK(error_of(dir).find("workload.txt:4: expected: kernel <name> <gemm") != std::string::npos);
  write(dir / "workload.txt", "format 3\nranks 1\nkernel_set s\nkernel qkv gemm m=0 n=8 k=8 batch=1 flops=1 bytes=1\n");
  CHECK(error_of(dir).find("at least 1") != std::string::npos);
  write(dir / "workload.txt", "format 3\nranks 1\ncompute_model fast\n");
  CHECK(error_of(dir).find("accepted: auto, kernels, roofline") != std::string::npos);
  // The attention kernel a workload was built for comes back by name, and only a known one.
  write(dir / "workload.txt", "format 3\nranks 1\ncompute_model kernels\nattention_kernel fa3\nprogram p.trace 0\n");
  write(dir / "p.trace", "0 compute flops=1\n");
  CHECK(read_trace(dir).step.efficiency.attention == AttentionKernel::fa3);
  Workload written = read_trace(dir);
  written.step.efficiency.attention = AttentionKernel::cudnn;
  const fs::path again = fresh_dir("kernel_lines_again");
  write_trace(written, again);
  CHECK(read_trace(again).step.efficiency.attention == AttentionKernel::cudnn);
  write(dir / "workload.txt", "format 3\nranks 1\nattention_kernel flash\n");
  CHECK(error_of(dir).find("attention_kernel") != std::string::npos);
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
  write(dir / "workload.txt", "format 4\n");
  CHECK(error_of(dir).find("format 4 is not supported; accepted: 1 to 3") != std::string::npos);
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

namespace doctest {
template <>
struct StringMaker<OpPlace> {
  static String convert(const OpPlace& place) {
    return ("{layer " + std::to_string(place.layer) + ", micro-batch " + std::to_string(place.micro_batch) +
            ", chunk " + std::to_string(place.chunk) + "}")
        .c_str();
  }
};
} // namespace doctest

namespace {

OpPlace place(int layer, int micro_batch, int chunk) {
  return {layer, micro_batch, static_cast<std::int16_t>(chunk)};
}
constexpr int none = OpPlace::none;

// Ops written before the place was a field gave it only in their names.
const char* const named_ops = R"(0 compute name=L3.fwd.mb2.c1.attn flops=1
1 collective name=grad-allreduce.bucket5.mb0 op=allreduce group=g0 bytes=1
2 compute name=cpu-adam.chunk3 flops=1
3 compute name=L12345678901.fwd flops=1
4 compute name=S3.input.mb7 flops=1
)";

} // namespace

TEST_CASE("a version 1 trace gives each op's place in its name") {
  const fs::path dir = fresh_dir("version1");
  write(dir / "workload.txt", workload_txt);
  write(dir / "p.trace", named_ops);
  const Workload workload = read_trace(dir);
  const auto& ops = workload.program(0).ops;
  REQUIRE(ops.size() == 5);
  CHECK(ops[0].place == place(3, 2, 1));
  CHECK(ops[1].place == place(none, 0, none));        // bucket5 is no place
  CHECK(ops[2].place == place(none, none, none));     // "chunk3" is not c<number>
  CHECK(ops[3].place == place(none, none, none));     // a layer beyond 32 bits is none, not wrapped
  CHECK(ops[4].place == place(none, 7, none));        // S3, a segment, is not a layer

  write(dir / "p.trace", "0 compute name=x flops=1 layer=3\n");
  CHECK(error_of(dir).find("unknown field 'layer'") != std::string::npos);
}

TEST_CASE("version 1 names give their layer, micro-batch and chunk") {
  CHECK(place_in_name("L12.fwd.mb3.c1.attn.sp-allgather") == place(12, 3, 1));
  CHECK(place_in_name("embedding.bwd.mb0") == place(none, 0, none));
  CHECK(place_in_name("grad-allreduce.c0") == place(none, none, 0));
  CHECK(place_in_name("optimizer.step") == place(none, none, none));
  CHECK(place_in_name("Lx.mbq.cat") == place(none, none, none));  // not numbers
}

TEST_CASE("a version 2 trace gives the place in fields, whatever the name says") {
  const fs::path dir = fresh_dir("version2");
  write(dir / "workload.txt", "format 2\nranks 2\ngroup g0 dp 0-1\nprogram p.trace 0-1\n");
  write(dir / "p.trace", named_ops);
  const Workload by_name = read_trace(dir);
  for (const Op& op : by_name.program(0).ops)
    CHECK(op.place == place(none, none, none));
  write(dir / "p.trace", "0 compute name=L3.fwd.mb2 flops=1 layer=5 micro_batch=1 chunk=0\n"
                         "1 collective op=allreduce group=g0 bytes=1 micro_batch=4\n");
  const Workload by_field = read_trace(dir);
  const auto& ops = by_field.program(1).ops;
  CHECK(ops[0].place == place(5, 1, 0));
  CHECK(ops[1].place == place(none, 4, none));
  write(dir / "p.trace", "0 compute flops=1 chunk=40000\n");
  CHECK(error_of(dir).find("chunk=40000; accepted: 0 to 32767") != std::string::npos);
}

TEST_CASE("the hand-written version 1 trace of the fixtures still reads, its ops in no place") {
  const Workload workload = read_trace(test::source_dir() / "tests/fixtures/hand-trace");
  const auto& ops = workload.program(1).ops;
  REQUIRE(ops.size() == 8);
  CHECK(ops[2].name == "forward");
  for (const Op& op : ops)
    CHECK(op.place == place(none, none, none));
}

namespace {

// The names of the ops whose place differs from what their name spells, space-separated (alloc
// and free have no place).
std::string misplaced(const Workload& workload) {
  std::string found;
  for (const auto& program : workload.programs)
    for (const Op& op : program->ops)
      if (op.kind != OpKind::alloc && op.kind != OpKind::free && !(op.place == place_in_name(op.name)))
        found += op.name + " ";
  return found;
}

Workload built(const std::vector<std::string>& overrides) {
  const Scenario scenario = load_scenario(test::write_temp_file("places.ini", test::tiny_scenario_ini), overrides);
  return build_workload(scenario, load_model(scenario.model_file, scenario.vocab_multiple), 0).workload;
}

} // namespace

// The builders place every op where its name says, so a version 1 trace trainsim wrote reads
// back with the places of a version 2 one, and the reports show the same.
TEST_CASE("data-parallel ops are placed where their names say, prefetched gathers in the use they serve") {
  // 2 micro-batches of 2 on dp = 2 (tp 2, sp, cp 2): ZeRO-3 gathers a use ahead, checkpoints every
  // 2 layers with the inputs in host memory, buckets of 1 MB.
  const Workload workload = built({"parallel.dp=2", "parallel.tp=2", "parallel.sp=true", "parallel.cp=2",
                                   "training.global_batch=8", "memory.zero=3", "memory.recompute=every:2",
                                   "memory.offload_activations=cpu", "comm.bucket_size=1MB"});
  CHECK(misplaced(workload) == "");
  const Program& program = workload.program(0);
  // Layer 1's attention of micro-batch 1, and the gather of layer 0 for micro-batch 1, written
  // during micro-batch 0's backward (prefetch depth 1).
  const Op& attention = test::op_named(program, "L1.fwd.mb1.attn.local");
  CHECK(attention.place == place(1, 1, none));
  const Op& gather = test::op_named(program, "gather.embedding.params.fwd.mb1");
  CHECK(gather.place == place(none, 1, none));
  const Op& step = test::op_named(program, "optimizer.step");
  CHECK(step.place == place(none, none, none));
}

TEST_CASE("interleaved pipeline ops are placed in their layer, micro-batch and chunk") {
  // tiny-gpt's 4 layers over pp 2 x vpp 2: one layer per virtual stage; the first stage's chunk 1
  // is virtual stage 2, layer 2. The optimizer runs on the CPU.
  const Workload workload = built({"parallel.dp=2", "parallel.pp=2", "parallel.vpp=2", "parallel.tp=2",
                                   "training.global_batch=8", "memory.recompute=full",
                                   "memory.offload_optimizer=cpu"});
  CHECK(misplaced(workload) == "");
  const Program& first_stage = workload.program(0);
  const Op& forward = test::op_named(first_stage, "L2.fwd.mb1.c1.mlp");
  CHECK(forward.place == place(2, 1, 1));
  const Op& send = test::op_named(first_stage, "send.act.mb0.c0");
  CHECK(send.place == place(none, 0, 0));
  const Op& reduction = test::op_named(first_stage, "grad-allreduce.c1.bucket0");
  CHECK(reduction.place == place(none, none, 1));
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
  names_read_back<MemCategory>(7);  // ..., buffers, cuda_context, nccl_buffers
  names_read_back<Device>(3);
  names_read_back<Phase>(5);
  CHECK(names_of<Device>() == "gpu, host, nvme");
  CHECK(from_name<Stream>("io-write") == Stream::io_write);
  CHECK(from_name<Collective>("reducescatter") == Collective::reduce_scatter);
}

TEST_CASE("an all-to-all's split is read back and checked against its group, op by op") {
  const fs::path dir = fresh_dir("splits");
  write(dir / "workload.txt", "format 3\nranks 2\nall_to_all_split 0.75,0.25\nall_to_all_split 0.25,0.25,0.25,0.25\n"
                              "group g0 ep 0-1\nprogram p.trace 0-1\n");
  write(dir / "p.trace", "0 collective op=alltoall group=g0 bytes=1e6 split=0\n"
                         "1 collective op=alltoall group=g0 bytes=1e6\n");
  Workload workload = read_trace(dir);
  CHECK(workload.all_to_all_splits.size() == 2);
  CHECK(workload.program(0).ops[0].peer == 0);
  CHECK(workload.program(0).ops[1].peer == -1);
  // Rank 1 sends 0.75 of its megabyte to rank 0 and keeps 0.25; rank 0 sends 0.25 away.
  CHECK(workload.bytes_sent(1, workload.program(1).ops[0]) == 0.75e6);
  CHECK(workload.bytes_sent(0, workload.program(0).ops[0]) == 0.25e6);
  CHECK(workload.bytes_sent(0, workload.program(0).ops[1]) == 0.5e6);  // evenly
  // The second all-to-all on the group names a split of four shares for its two members.
  write(dir / "p.trace", "0 collective op=alltoall group=g0 bytes=1e6 split=0\n"
                         "1 collective op=alltoall group=g0 bytes=1e6 split=1\n");
  CHECK(error_of(dir).find("split 1 gives 4 shares for group g0 of 2 ranks") != std::string::npos);
  write(dir / "p.trace", "0 collective op=alltoall group=g0 bytes=1e6 split=2\n");
  CHECK(error_of(dir).find("names no split") != std::string::npos);
  write(dir / "workload.txt", "format 3\nranks 2\nall_to_all_split 0.5,0.4\ngroup g0 ep 0-1\nprogram p.trace 0-1\n");
  CHECK(error_of(dir).find("add up to 0.9") != std::string::npos);
}
