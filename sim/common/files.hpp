#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace trainsim {

// Writes to a temporary file beside `path`, then renames it into place, so that an
// interrupted run never leaves a file that looks complete. Throws InputError on failure
// (a full disk included), leaving neither the file nor its temporary.
void write_file_atomically(const std::filesystem::path& path, const std::string& content);

// Where scratch files go: $TMPDIR, else /tmp; InputError naming it when it is not a folder.
std::filesystem::path scratch_directory();

// A private folder in scratch_directory(), "trainsim-<purpose>-XXXXXX", removed with what it
// holds when destroyed. Throws InputError naming the folder when it cannot be made.
class ScratchFolder {
public:
  explicit ScratchFolder(const std::string& purpose);
  ~ScratchFolder();
  ScratchFolder(const ScratchFolder&) = delete;
  ScratchFolder& operator=(const ScratchFolder&) = delete;
  const std::filesystem::path& path() const { return path_; }

private:
  std::filesystem::path path_;
};

// An output directory made before a long run, so that one that cannot be made fails first; a
// run that fails after that leaves no empty directory behind: destroyed before keep(), it
// removes the directories it made (the parents too) that hold nothing.
class OutputDirectory {
public:
  // Throws InputError naming the directory when it cannot be made.
  explicit OutputDirectory(std::filesystem::path directory);
  ~OutputDirectory();
  OutputDirectory(const OutputDirectory&) = delete;
  OutputDirectory& operator=(const OutputDirectory&) = delete;
  void keep() { made_.clear(); }

private:
  std::filesystem::path directory_;
  std::vector<std::filesystem::path> made_;  // the folders it made, innermost first
};

// The files one command leaves in a directory, all from this run or none: each is written under
// a temporary name beside its place; commit() moves them all into place and removes the files of
// `known` that this run did not write (a previous run's report beside a --no-report summary).
// Destroyed without a commit (an error on the way), it removes what it wrote.
class OutputSet {
public:
  OutputSet(std::filesystem::path directory, std::vector<std::string> known);
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  // `name` must be one of the known names. Throws InputError when it cannot be written.
  void write(const std::string& name, const std::string& content);
  // Throws InputError, leaving none of the known files, when a file cannot be moved into place.
  void commit();

private:
  void remove_known();

  std::filesystem::path directory_;
  std::vector<std::string> known_;
  std::vector<std::string> written_;
  bool committed_ = false;
};

} // namespace trainsim
