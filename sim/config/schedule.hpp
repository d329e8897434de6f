#pragma once
// The pipeline schedules trainsim simulates (program/pipeline_schedule gives their order). A value
// type of its own so that the scenario names it without including the program module.

#include <string>
#include <utility>
#include <vector>

namespace trainsim {

enum class Schedule { gpipe, one_f_one_b, interleaved, zb_h1, zb_h2, zb_v, dualpipev };
// As parallel.schedule names them.
const std::vector<std::pair<std::string, Schedule>>& schedule_names();
const char* to_string(Schedule schedule);

// The zero-bubble schedules and DualPipeV run a backward as two passes, input gradients then
// weight gradients (DualPipeV: some of them).
inline bool splits_backward(Schedule schedule) {
  return schedule == Schedule::zb_h1 || schedule == Schedule::zb_h2 || schedule == Schedule::zb_v ||
         schedule == Schedule::dualpipev;
}
// ZB-V and DualPipeV place a rank's two model chunks in a V: chunk 0 is virtual stage `stage`,
// chunk 1 virtual stage 2 pp - 1 - stage, so that the first and the last virtual stages share
// rank 0.
inline bool v_placement(Schedule schedule) { return schedule == Schedule::zb_v || schedule == Schedule::dualpipev; }

} // namespace trainsim
