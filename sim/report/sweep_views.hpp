#pragma once
// The pictures of a sweep or a plan: sweep.svg (throughput against peak memory, one point per
// simulated configuration, those that do not fit marked) and sweep.html (the plot and a table
// that sorts by any column, self-contained).
#include <string>
#include <vector>

#include "sweep/sweep.hpp"

namespace trainsim {

std::string sweep_svg(const std::vector<SweepRow>& rows);
std::string sweep_html(const std::string& title, const std::vector<SweepRow>& rows);

} // namespace trainsim
