#include "config/comm_tuning.hpp"

#include "common/text.hpp"

namespace trainsim {

const std::vector<std::pair<std::string, bool>>& comm_collectives_names() {
  static const std::vector<std::pair<std::string, bool>> names = {{"nccl", false}, {"ideal", true}};
  return names;
}

const std::vector<std::pair<std::string, CommAlgorithm>>& comm_algorithm_names() {
  static const std::vector<std::pair<std::string, CommAlgorithm>> names = {
      {"auto", CommAlgorithm::automatic}, {"ring", CommAlgorithm::ring}, {"tree", CommAlgorithm::tree},
      {"nvls", CommAlgorithm::nvls}};
  return names;
}

const std::vector<std::pair<std::string, CommProtocol>>& comm_protocol_names() {
  static const std::vector<std::pair<std::string, CommProtocol>> names = {{"auto", CommProtocol::automatic},
                                                                           {"ll", CommProtocol::ll},
                                                                           {"ll128", CommProtocol::ll128},
                                                                           {"simple", CommProtocol::simple}};
  return names;
}

const char* to_string(CommAlgorithm algorithm) { return name_of(comm_algorithm_names(), algorithm); }
const char* to_string(CommProtocol protocol) { return name_of(comm_protocol_names(), protocol); }

std::pair<std::string, std::string> comm_tuning_conflict(const CommTuning& tuning) {
  if (tuning.ideal && (tuning.algorithm != CommAlgorithm::automatic || tuning.protocol != CommProtocol::automatic))
    return {"comm.collectives", "ideal collectives have no algorithm or protocol; accepted: nccl, or "
                                "comm.algorithm and comm.protocol = auto"};
  if (tuning.algorithm == CommAlgorithm::nvls && tuning.protocol != CommProtocol::automatic &&
      tuning.protocol != CommProtocol::simple)
    return {"comm.protocol", "NVLS runs the Simple protocol only; accepted: auto, simple, or comm.algorithm = ring or tree"};
  return {};
}

} // namespace trainsim
