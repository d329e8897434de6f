#include "common/files.hpp"

#include <fstream>

#include "common/error.hpp"

namespace trainsim {

void write_file_atomically(const std::filesystem::path& path, const std::string& content) {
  const std::filesystem::path temporary = path.string() + ".tmp";
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out)
      throw InputError(path.string() + ": cannot write (check that the output directory is writable)");
    out << content;
    if (!out.flush())
      throw InputError(path.string() + ": write failed");
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error)
    throw InputError(path.string() + ": cannot move the finished file into place: " + error.message());
}

} // namespace trainsim
