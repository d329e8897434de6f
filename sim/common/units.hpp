#pragma once
// Quantities with units, as people write them in scenarios and platform files:
// "80GiB", "25MB", "312Tf", "200Gbps", "1us", "1e9", "300B" (tokens).
// Each parser throws UnitError whose message lists what is accepted; callers add
// the file and key.
#include <stdexcept>
#include <string>
#include <string_view>

namespace trainsim {

class UnitError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

double parse_bytes(std::string_view text);      // B, KB, MB, GB, TB (1000^k), KiB, MiB, GiB, TiB (1024^k); unit required
double parse_bandwidth(std::string_view text);  // bytes/s: Bps, KBps, .., GiBps; bits/s: bps, Kbps, Mbps, Gbps, Tbps
double parse_flops(std::string_view text);      // f, kf, Mf, Gf, Tf, Pf, Ef (FLOP/s)
double parse_seconds(std::string_view text);    // s, ms, us, ns, min, h, d
double parse_count(std::string_view text);      // plain number, or K, M, B (billion), T (trillion)
double parse_tokens(std::string_view text);     // a count of training tokens, positive and at most max_tokens
constexpr double max_tokens = 1e15;             // 1000T: far beyond any training run, short of absurd times

// Human-readable forms for reports: "79.5 GiB", "1.23 ms".
std::string format_bytes(double bytes);
std::string format_seconds(double seconds);
std::string format_count(double count);
// A wall-clock duration to the second for progress lines: "45s", "3m12s", "2h05m"; "?" if unknown.
std::string format_duration(double seconds);
// FLOP/s as platform files write them: "312Tf".
std::string format_flops(double flops_per_second);

} // namespace trainsim
