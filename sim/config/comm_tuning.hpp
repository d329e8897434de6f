#pragma once
// What a scenario (comm.collectives, comm.algorithm, comm.protocol) or a command's options say
// about how collectives run; program/nccl_model.hpp is what it means.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace trainsim {

enum class CommAlgorithm : std::uint8_t { automatic, ring, tree, nvls };
enum class CommProtocol : std::uint8_t { automatic, ll, ll128, simple };

struct CommTuning {
  CommAlgorithm algorithm = CommAlgorithm::automatic;  // automatic: NCCL's choice per call
  CommProtocol protocol = CommProtocol::automatic;
  bool ideal = false;  // links at full bandwidth, route latency per ring step, no protocol
};

// The accepted names, in the order errors list them.
const std::vector<std::pair<std::string, bool>>& comm_collectives_names();  // nccl, ideal (true)
const std::vector<std::pair<std::string, CommAlgorithm>>& comm_algorithm_names();
const std::vector<std::pair<std::string, CommProtocol>>& comm_protocol_names();
const char* to_string(CommAlgorithm algorithm);
const char* to_string(CommProtocol protocol);

// What cannot go together, as the scenario's key and "why; accepted: ..." (an empty key when the
// tuning is consistent).
std::pair<std::string, std::string> comm_tuning_conflict(const CommTuning& tuning);

} // namespace trainsim
