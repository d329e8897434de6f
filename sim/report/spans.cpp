#include "report/spans.hpp"

namespace trainsim {

SpanRecorder::SpanRecorder(const Workload& workload, std::vector<int> ranks)
    : ranks_(std::move(ranks)), slot_of_rank_(workload.ranks(), -1) {
  for (std::size_t i = 0; i < ranks_.size(); ++i) {
    slot_of_rank_[ranks_[i]] = static_cast<int>(i);
    started_.emplace_back(workload.program(ranks_[i]).ops.size(), 0.0);
  }
  spans_.resize(ranks_.size());
}

void SpanRecorder::op_started(int rank, OpId op, double time) {
  const int slot = slot_of_rank_[rank];
  if (slot >= 0)
    started_[slot][op] = time;
}

void SpanRecorder::op_finished(int rank, OpId op, double time) {
  const int slot = slot_of_rank_[rank];
  if (slot < 0)
    return;
  Span span{op, started_[slot][op], time};
  if (const auto chosen = chosen_.find({slot, op}); chosen != chosen_.end()) {
    std::tie(span.algorithm, span.protocol) = chosen->second;
    chosen_.erase(chosen);
  }
  spans_[slot].push_back(span);
}

void SpanRecorder::collective_chosen(int rank, OpId op, const CommChoice& choice) {
  const int slot = slot_of_rank_[rank];
  if (slot >= 0)
    chosen_[{slot, op}] = {choice.algorithm, choice.protocol};
}

void SpanRecorder::op_transferred(int rank, OpId op, const Transfer& transfer) {
  // A send or collective spans the wait for its peers; the chart shows when data moved.
  const int slot = slot_of_rank_[rank];
  if (slot >= 0)
    started_[slot][op] = transfer.start;
}

void ObserverFanout::op_started(int rank, OpId op, double time) {
  for (ReplayObserver* observer : observers_)
    observer->op_started(rank, op, time);
}

void ObserverFanout::op_finished(int rank, OpId op, double time) {
  for (ReplayObserver* observer : observers_)
    observer->op_finished(rank, op, time);
}

void ObserverFanout::op_transferred(int rank, OpId op, const Transfer& transfer) {
  for (ReplayObserver* observer : observers_)
    observer->op_transferred(rank, op, transfer);
}

void ObserverFanout::resources_bound(const PlatformResources& resources) {
  for (ReplayObserver* observer : observers_)
    observer->resources_bound(resources);
}

void ObserverFanout::collective_chosen(int rank, OpId op, const CommChoice& choice) {
  for (ReplayObserver* observer : observers_)
    observer->collective_chosen(rank, op, choice);
}

void ObserverFanout::link_carried(const std::vector<int>& links, double bytes) {
  for (ReplayObserver* observer : observers_)
    observer->link_carried(links, bytes);
}

void ObserverFanout::cpu_worked(int cpu, double seconds, double bytes) {
  for (ReplayObserver* observer : observers_)
    observer->cpu_worked(cpu, seconds, bytes);
}

void ObserverFanout::drive_worked(int drive, bool read, double seconds, double bytes) {
  for (ReplayObserver* observer : observers_)
    observer->drive_worked(drive, read, seconds, bytes);
}

} // namespace trainsim
