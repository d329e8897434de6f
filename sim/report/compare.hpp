#pragma once
// trainsim compare: finished runs side by side, from their summary.json (and memory.csv): the
// step, throughput, MFU, memory at the peak by category, the step's parts (exposed communication
// by kind, bubble, recompute), communication by kind, the settings that differ; each value of a
// later run with its change from the first, the large ones marked; and what most of the step
// time's difference is. Pure: the CLI reads the files.
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace trainsim {

struct ComparedRun {
  std::string name;       // the run's label: its folder's name
  nlohmann::json summary;  // its summary.json
  // The peak rank's GPU memory over the step (time_s, bytes), from memory.csv; empty without one.
  std::vector<std::pair<double, double>> memory;
  // The step's parts by name (step_parts_of the summary; empty when it has none).
  std::vector<std::pair<std::string, double>> parts;
};

// One compared quantity: a value per run (NaN where a run has none), how to show it, and whether
// less or more is better (-1, +1; 0 for neither).
struct ComparedValue {
  std::string label;
  std::vector<double> values;
  std::string (*format)(double) = nullptr;
  int better = 0;
};

// A change counts as large from this fraction of the first run's value on.
constexpr double large_change = 0.05;

std::vector<ComparedValue> compared_values(const std::vector<ComparedRun>& runs);
// The scenario settings whose values are not the same in every run: (key, one value per run).
std::vector<std::pair<std::string, std::vector<std::string>>> differing_settings(const std::vector<ComparedRun>& runs);
// "b's step is 0.45 s (8.3 %) longer than a's, most of it exposed tp communication (+0.40 s)", for
// each run after the first.
std::vector<std::string> step_differences(const std::vector<ComparedRun>& runs);

// The comparison as aligned text: the table, its footnote, the differing settings, the step lines.
std::string compare_text(const std::vector<ComparedRun>& runs);
// The same as a self-contained page, with the peak ranks' memory overlaid and the steps' parts
// as bars side by side.
std::string compare_html(const std::vector<ComparedRun>& runs);

} // namespace trainsim
