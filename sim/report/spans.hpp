#pragma once
// What the chosen ranks did and when: every op's span on its stream, recorded during the
// replay for the trace file and the pipeline chart. Only a few ranks are recorded (one per
// pipeline stage by default), so large runs stay small.
#include <map>
#include <string>
#include <vector>

#include "engine/observer.hpp"
#include "program/program.hpp"

namespace trainsim {

struct Span {
  OpId op = 0;
  double start = 0;
  double end = 0;
  // A collective: how it ran (automatic: not told, e.g. ideal collectives have none).
  CommAlgorithm algorithm = CommAlgorithm::automatic;
  CommProtocol protocol = CommProtocol::automatic;
};

class SpanRecorder : public ReplayObserver {
public:
  SpanRecorder(const Workload& workload, std::vector<int> ranks);
  void op_started(int rank, OpId op, double time) override;
  void op_finished(int rank, OpId op, double time) override;
  void op_transferred(int rank, OpId op, const Transfer& transfer) override;
  void collective_chosen(int rank, OpId op, const CommChoice& choice) override;

  const std::vector<int>& ranks() const { return ranks_; }
  // Spans of ranks()[i], in the order the ops finished.
  const std::vector<Span>& spans(std::size_t i) const { return spans_[i]; }

private:
  std::vector<int> ranks_;
  std::vector<int> slot_of_rank_;            // index into ranks_, or -1
  std::vector<std::vector<double>> started_;  // per recorded rank, per op
  std::map<std::pair<int, OpId>, std::pair<CommAlgorithm, CommProtocol>> chosen_;  // (slot, op), until it finishes
  std::vector<std::vector<Span>> spans_;
};

// Sends each event to every observer, in order.
class ObserverFanout : public ReplayObserver {
public:
  explicit ObserverFanout(std::vector<ReplayObserver*> observers) : observers_(std::move(observers)) {}
  void op_started(int rank, OpId op, double time) override;
  void op_finished(int rank, OpId op, double time) override;
  void op_transferred(int rank, OpId op, const Transfer& transfer) override;
  void resources_bound(const PlatformResources& resources) override;
  void collective_chosen(int rank, OpId op, const CommChoice& choice) override;
  void link_carried(const std::vector<int>& links, double bytes) override;
  void cpu_worked(int cpu, double seconds, double bytes) override;
  void drive_worked(int drive, bool read, double seconds, double bytes) override;

private:
  std::vector<ReplayObserver*> observers_;
};

} // namespace trainsim
