#pragma once
// The pictures of a sweep or a plan: sweep.svg (throughput against peak memory, one point per
// simulated configuration, those that do not fit marked, coloured by a varied key's value, each
// GPU type's memory dashed; with one varied key, its values against throughput below) and
// sweep.html (the plot and a table that sorts by any column, self-contained).
#include <string>
#include <vector>

#include "sweep/sweep.hpp"

namespace trainsim {

// The varied key points are coloured by unless the user chooses: the first with 2 to 10 values
// among the simulated rows ("" for none).
std::string sweep_colour_key(const std::vector<SweepRow>& rows);
// `colour_key` "": one colour, crosses red.
std::string sweep_svg(const std::vector<SweepRow>& rows, const std::string& colour_key);
std::string sweep_html(const std::string& title, const std::vector<SweepRow>& rows, const std::string& colour_key);

} // namespace trainsim
