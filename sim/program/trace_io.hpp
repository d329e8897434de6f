#pragma once
// The text form of a workload (docs/trace-format.md): a directory with
// workload.txt (step metadata, groups, which program file each rank runs) and
// one program file per distinct program, one op per line.
#include <filesystem>
#include <functional>
#include <string>

#include "program/program.hpp"

namespace trainsim {

// Writes the trace into `directory`, with `extra` files beside it (name, text), all or none: the
// files of an earlier trace there (program files included) are replaced, and a failed write
// leaves none of them. Throws InputError.
void write_trace(const Workload& workload, const std::filesystem::path& directory,
                 const std::vector<std::pair<std::string, std::string>>& extra = {});
// Throws InputError naming the file and line.
Workload read_trace(const std::filesystem::path& directory);
// The same from texts: workload.txt's, named `workload_name` in errors, and a function
// returning the text of a program file it names.
Workload parse_trace(const std::string& workload_text, const std::string& workload_name,
                     const std::function<std::string(const std::string&)>& program_text);

// An op's place as a version 1 trace gives it, in the parts of its name: "L3.fwd.mb2.c1.attn" is
// layer 3, micro-batch 2, chunk 1; a part that is absent (or too large) leaves it none.
OpPlace place_in_name(const std::string& name);

} // namespace trainsim
