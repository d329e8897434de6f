#pragma once
#include <filesystem>
#include <string>

namespace trainsim {

// Writes to a temporary file beside `path`, then renames it into place, so that an
// interrupted run never leaves a file that looks complete. Throws InputError on failure.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

} // namespace trainsim
