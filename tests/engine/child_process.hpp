#pragma once
// SimGrid keeps one simulation per process: each engine test runs its simulation in a forked
// child and gets back what the child made of it.
#include <cstdio>
#include <functional>
#include <string>

#include <sys/wait.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include "common/error.hpp"

namespace trainsim::test {

// What `work` returned in a child process, or "InputError: " and the message of the InputError
// it threw; "child failed" if it ended otherwise.
inline std::string in_child(const std::function<std::string()>& work) {
  int channel[2];
  REQUIRE(pipe(channel) == 0);
  std::fflush(nullptr);  // or the child would print what this process has buffered a second time
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    close(channel[0]);
    std::string answer;
    try {
      answer = work();
    } catch (const InputError& error) {
      answer = std::string("InputError: ") + error.what();
    } catch (...) {
      _exit(1);
    }
    for (std::size_t done = 0; done < answer.size();) {
      const ssize_t wrote = write(channel[1], answer.data() + done, answer.size() - done);
      if (wrote <= 0)
        _exit(2);
      done += static_cast<std::size_t>(wrote);
    }
    _exit(0);
  }
  close(channel[1]);
  std::string received;
  char chunk[65536];
  for (ssize_t got; (got = read(channel[0], chunk, sizeof chunk)) > 0;)
    received.append(chunk, static_cast<std::size_t>(got));
  close(channel[0]);
  int status = 0;
  waitpid(child, &status, 0);
  return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? received : "child failed";
}

inline std::string platform_file(const std::string& name) {
  return std::string(TRAINSIM_SOURCE_DIR) + "/platforms/" + name;
}

} // namespace trainsim::test
