#pragma once
// The text form of a workload (docs/trace-format.md): a directory with
// workload.txt (step metadata, groups, which program file each rank runs) and
// one program file per distinct program, one op per line.
#include <filesystem>

#include "program/program.hpp"

namespace trainsim {

void write_trace(const Workload& workload, const std::filesystem::path& directory);
// Throws InputError naming the file and line.
Workload read_trace(const std::filesystem::path& directory);

} // namespace trainsim
