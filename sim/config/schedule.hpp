#pragma once
// The pipeline schedules trainsim simulates (program/pipeline_schedule gives their order). A value
// type of its own so that the scenario names it without including the program module.

namespace trainsim {

enum class Schedule { gpipe, one_f_one_b, interleaved, zb_h1, zb_h2 };
const char* to_string(Schedule schedule);

// The zero-bubble schedules run a backward as two passes, input gradients then weight gradients.
inline bool splits_backward(Schedule schedule) { return schedule == Schedule::zb_h1 || schedule == Schedule::zb_h2; }

} // namespace trainsim
