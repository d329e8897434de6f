#include <doctest/doctest.h>

#include "common/error.hpp"
#include "program/program.hpp"

using namespace trainsim;

namespace {

Op collective(int group, double bytes) {
  Op op;
  op.kind = OpKind::collective;
  op.stream = Stream::dp_comm;
  op.group = group;
  op.bytes = bytes;
  return op;
}

Op p2p(OpKind kind, int peer) {
  Op op;
  op.kind = kind;
  op.stream = Stream::pp_comm;
  op.peer = peer;
  op.bytes = 10;
  return op;
}

std::string error_of(const Workload& workload) {
  try {
    validate_workload(workload, "w");
  } catch (const InputError& error) {
    return error.what();
  }
  FAIL("accepted");
  return "";
}

Workload two_ranks(Program a, Program b) {
  Workload workload;
  workload.groups.push_back({"g", "dp", {0, 1}});
  workload.programs = {std::make_shared<const Program>(std::move(a)), std::make_shared<const Program>(std::move(b))};
  return workload;
}

} // namespace

TEST_CASE("collectives issued in different orders would deadlock and are refused") {
  Program a, b;
  a.add(collective(0, 10));
  a.add(collective(0, 20));
  b.add(collective(0, 20));
  b.add(collective(0, 10));
  const std::string message = error_of(two_ranks(a, b));
  CHECK(message.find("same collectives in the same order") != std::string::npos);
  // It says where they part: the first collective, 10 bytes on rank 0 and 20 on rank 1.
  CHECK(message.find("collective 1 is allreduce of 10 bytes on rank 0 but allreduce of 20 bytes on rank 1") !=
        std::string::npos);
}

TEST_CASE("a send and its recv that disagree on the bytes are refused") {
  Program a, b;
  a.add(p2p(OpKind::send, 1));
  Op recv = p2p(OpKind::recv, 0);
  recv.bytes = 12;
  b.add(recv);
  const std::string message = error_of(two_ranks(a, b));
  CHECK(message.find("send 1 from rank 0 to rank 1 with tag 0 carries 10 bytes but its recv expects 12") !=
        std::string::npos);
}

TEST_CASE("a send without its recv is refused") {
  Program a, b;
  a.add(p2p(OpKind::send, 1));
  CHECK(error_of(two_ranks(a, b)).find("1 send(s) from rank 0 to rank 1 with tag 0 but 0 recv(s)") != std::string::npos);
  b.add(p2p(OpKind::recv, 0));
  CHECK_NOTHROW(validate_workload(two_ranks(a, b), "w"));
}

TEST_CASE("peers and group members must exist") {
  Program a, b;
  a.add(p2p(OpKind::send, 7));
  CHECK(error_of(two_ranks(a, b)).find("not another rank") != std::string::npos);
  Workload workload = two_ranks(Program{}, Program{});
  workload.groups[0].ranks = {0, 5};
  CHECK(error_of(workload).find("names rank 5") != std::string::npos);
}

TEST_CASE("a shared program's slots are read through each rank's binding") {
  // One program for both ranks: slot 0 is a group, peer slot 0 the other rank.
  Program shared;
  shared.add(collective(0, 10));
  Workload workload;
  workload.groups = {{"g", "dp", {0, 1}}, {"t", "tp", {0, 1}}};
  const auto program = std::make_shared<const Program>(std::move(shared));
  workload.programs = {program, program};
  workload.bindings = {{{0}, {1}}, {{0}, {0}}};
  CHECK_NOTHROW(validate_workload(workload, "w"));
  CHECK(workload.group_of(1, 0) == 0);
  CHECK(workload.peer_of(1, 0) == 0);
  CHECK(workload.peer_of(1, 3) == -1);  // a slot the binding does not have

  workload.bindings[1].groups = {1};  // the same op would be a dp collective on one rank, tp on the other
  CHECK(error_of(workload).find("differs in kind or size") != std::string::npos);
  workload.bindings[1].groups = {};
  CHECK(error_of(workload).find("unknown group") != std::string::npos);
  workload.bindings.pop_back();
  CHECK(error_of(workload).find("1 bindings for 2 ranks") != std::string::npos);
}
