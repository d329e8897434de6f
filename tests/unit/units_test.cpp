#include <doctest/doctest.h>

#include "common/units.hpp"

using namespace trainsim;

TEST_CASE("byte sizes use SI prefixes for B and binary prefixes for iB") {
  CHECK(parse_bytes("80GiB") == 80.0 * 1024 * 1024 * 1024);
  CHECK(parse_bytes("25MB") == 25e6);
  CHECK(parse_bytes("25MiB") == 25.0 * 1024 * 1024);
  CHECK(parse_bytes("1048576B") == 1048576.0);
  // Without a unit a size is ambiguous ("bucket_size = 25" meant as 25 MiB would be 25 bytes).
  CHECK_THROWS_AS(parse_bytes("1048576"), UnitError);
  CHECK(parse_bytes(" 1.5 KB ") == 1500.0);
}

TEST_CASE("bandwidths accept bytes and bits per second") {
  CHECK(parse_bandwidth("25GBps") == 25e9);
  CHECK(parse_bandwidth("200Gbps") == 25e9);  // 200 Gb/s InfiniBand HDR = 25 GB/s
  CHECK(parse_bandwidth("1GiBps") == 1024.0 * 1024 * 1024);
  CHECK_THROWS_AS(parse_bandwidth("25"), UnitError);  // a bandwidth needs a unit
}

TEST_CASE("FLOP rates, durations and counts") {
  CHECK(parse_flops("312Tf") == 312e12);
  CHECK(parse_flops("19.5Tf") == 19.5e12);
  CHECK(parse_seconds("1us") == doctest::Approx(1e-6));
  CHECK(parse_seconds("2.5ms") == doctest::Approx(2.5e-3));
  CHECK(parse_seconds("3") == 3.0);
  CHECK(parse_count("1e9") == 1e9);
  CHECK(parse_count("300B") == 300e9);
  CHECK(parse_count("2T") == 2e12);
}

TEST_CASE("malformed quantities are rejected with the accepted forms") {
  for (const char* bad : {"abc", "-5GB", "5XB", "inf", "nan", "", "GB", "+3GB"}) {
    CAPTURE(bad);
    try {
      parse_bytes(bad);
      FAIL("accepted");
    } catch (const UnitError& error) {
      CHECK(std::string(error.what()).find("accepted") != std::string::npos);
    }
  }
}

TEST_CASE("token counts take units and stay within a sane range") {
  CHECK(parse_tokens("300B") == 300e9);
  CHECK(parse_tokens("1000T") == 1e15);
  for (const char* bad : {"0", "1e308", "1001T"}) {
    CAPTURE(bad);
    CHECK_THROWS_AS(parse_tokens(bad), UnitError);
  }
}

TEST_CASE("human-readable formatting picks the unit") {
  CHECK(format_bytes(80.0 * 1024 * 1024 * 1024) == "80.00 GiB");
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_seconds(0.0123) == "12.300 ms");
  CHECK(format_seconds(2.5) == "2.500 s");
  CHECK(format_count(6.738e9) == "6.74B");
  CHECK(format_count(5.78e18) == "5.78E");  // exa, peta: a large step's FLOPs
  CHECK(format_count(2.5e15) == "2.50P");
}
