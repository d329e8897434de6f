#pragma once
// The pipeline schedules trainsim simulates (program/pipeline_schedule gives their order). A value
// type of its own so that the scenario names it without including the program module.

#include <string>
#include <utility>
#include <vector>

namespace trainsim {

enum class Schedule { gpipe, one_f_one_b, interleaved, zb_h1, zb_h2, zb_v, dualpipev, dualpipe };
// As parallel.schedule names them.
const std::vector<std::pair<std::string, Schedule>>& schedule_names();
const char* to_string(Schedule schedule);

// The zero-bubble schedules, DualPipeV and DualPipe run a backward as two passes, input gradients
// then weight gradients (DualPipeV and DualPipe: some of them).
inline bool splits_backward(Schedule schedule) {
  return schedule == Schedule::zb_h1 || schedule == Schedule::zb_h2 || schedule == Schedule::zb_v ||
         schedule == Schedule::dualpipev || schedule == Schedule::dualpipe;
}
// DualPipe feeds half the micro-batches from each end of the pipeline: those going down pass
// virtual stages 0 to pp - 1, those going up pp to 2 pp - 1, each direction through the whole
// model, so that every pipeline rank holds two copies' stages.
inline bool two_directions(Schedule schedule) { return schedule == Schedule::dualpipe; }
// ZB-V, DualPipeV and DualPipe place a rank's two model chunks as a V does: chunk 0 is virtual
// stage `stage`, chunk 1 virtual stage 2 pp - 1 - stage, so that rank 0 holds the first and the
// last (under DualPipe: the first stage going down and the last going up, and the last rank the
// others).
inline bool v_placement(Schedule schedule) {
  return schedule == Schedule::zb_v || schedule == Schedule::dualpipev || two_directions(schedule);
}
// Bidirectional pairs: a forward with a whole backward of another micro-batch beside it.
inline bool pairs_passes(Schedule schedule) {
  return schedule == Schedule::dualpipev || schedule == Schedule::dualpipe;
}

} // namespace trainsim
