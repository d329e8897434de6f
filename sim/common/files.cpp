#include "common/files.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>

#include <unistd.h>

#include "common/error.hpp"

namespace fs = std::filesystem;

namespace trainsim {
namespace {

fs::path temporary_of(const fs::path& path) { return path.string() + ".tmp"; }

// Writes `content` to `temporary`; on failure removes it and throws InputError naming `path`.
void write_temporary(const fs::path& temporary, const fs::path& path, const std::string& content) {
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  if (!out)
    throw InputError(path.string() + ": cannot write (" + std::strerror(errno) +
                     "; check that the output directory is writable)");
  out << content;
  out.flush();
  out.close();  // the last buffered bytes reach the disk here: a full disk shows now or never
  if (out.fail()) {
    const std::string why = std::strerror(errno);
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw InputError(path.string() + ": write failed (" + why + ")");
  }
}

} // namespace

fs::path scratch_directory() {
  std::error_code error;
  const fs::path directory = fs::temp_directory_path(error);
  if (error) {
    const char* configured = std::getenv("TMPDIR");
    throw InputError(std::string("TMPDIR ") + (configured ? configured : "") +
                     ": not a folder for scratch files; accepted: an existing, writable folder (or TMPDIR unset: /tmp)");
  }
  return directory;
}

ScratchFolder::ScratchFolder(const std::string& purpose) {
  const fs::path directory = scratch_directory();
  std::string name = (directory / ("trainsim-" + purpose + "-XXXXXX")).string();
  if (!::mkdtemp(name.data()))
    throw InputError(directory.string() + ": cannot make a scratch folder (" + std::strerror(errno) +
                     "); accepted: a writable TMPDIR");
  path_ = name;
}

ScratchFolder::~ScratchFolder() {
  std::error_code ignored;
  fs::remove_all(path_, ignored);
}

void write_file_atomically(const fs::path& path, const std::string& content) {
  const fs::path temporary = temporary_of(path);
  write_temporary(temporary, path, content);
  std::error_code error;
  fs::rename(temporary, path, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    throw InputError(path.string() + ": cannot move the finished file into place: " + error.message());
  }
}

OutputDirectory::OutputDirectory(fs::path directory) : directory_(std::move(directory)) {
  std::error_code error;
  // The folders this makes, innermost first: results/run made in a fresh folder is two.
  for (fs::path missing = directory_; !missing.empty() && !fs::exists(missing, error); missing = missing.parent_path())
    made_.push_back(missing);
  fs::create_directories(directory_, error);
  if (!fs::is_directory(directory_))
    throw InputError(directory_.string() + ": cannot create the output directory" +
                     (error ? " (" + error.message() + ")" : std::string()));
}

OutputDirectory::~OutputDirectory() {
  std::error_code error;
  for (const fs::path& made : made_)
    if (fs::is_empty(made, error))
      fs::remove(made, error);
}

OutputSet::OutputSet(fs::path directory, std::vector<std::string> known)
    : directory_(std::move(directory)), known_(std::move(known)) {}

OutputSet::~OutputSet() {
  if (committed_)
    return;
  std::error_code ignored;
  for (const std::string& name : written_)
    fs::remove(temporary_of(directory_ / name), ignored);
}

void OutputSet::write(const std::string& name, const std::string& content) {
  if (std::find(known_.begin(), known_.end(), name) == known_.end())
    throw std::logic_error("OutputSet: " + name + " is not one of the known outputs");
  written_.push_back(name);
  write_temporary(temporary_of(directory_ / name), directory_ / name, content);
}

void OutputSet::remove_known() {
  std::error_code ignored;
  for (const std::string& name : known_) {
    fs::remove(directory_ / name, ignored);
    fs::remove(temporary_of(directory_ / name), ignored);
  }
}

void OutputSet::commit() {
  committed_ = true;
  for (const std::string& name : known_) {
    const fs::path path = directory_ / name;
    std::error_code error;
    if (std::find(written_.begin(), written_.end(), name) != written_.end())
      fs::rename(temporary_of(path), path, error);
    else
      fs::remove(path, error);
    if (error) {
      const std::string what = fs::exists(temporary_of(path)) ? "move the finished file into place"
                                                               : "remove the previous run's file";
      remove_known();
      throw InputError(path.string() + ": cannot " + what + ": " + error.message());
    }
  }
}

} // namespace trainsim
