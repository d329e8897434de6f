#include "model/routing.hpp"

#include <algorithm>
#include <cmath>

namespace trainsim {

std::vector<double> expert_shares(const ExpertRouting& routing, long long experts) {
  const auto count = static_cast<std::size_t>(experts);
  std::vector<double> shares(count, 1.0 / static_cast<double>(experts));
  if (routing.zipf > 0) {
    double total = 0;
    for (std::size_t e = 0; e < count; ++e)
      total += shares[e] = std::pow(static_cast<double>(e + 1), -routing.zipf);
    for (double& share : shares)
      share /= total;
  }
  if (routing.capacity_factor > 0)
    for (double& share : shares)
      share = std::min(share, routing.capacity_factor / static_cast<double>(experts));
  return shares;
}

} // namespace trainsim
