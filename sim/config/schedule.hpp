#pragma once
// The pipeline schedules trainsim simulates (program/pipeline_schedule gives their order). A value
// type of its own so that the scenario names it without including the program module.

namespace trainsim {

enum class Schedule { gpipe, one_f_one_b, interleaved };
const char* to_string(Schedule schedule);

} // namespace trainsim
