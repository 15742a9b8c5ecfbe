// bench/calls_caf.cpp — CAF 0.17's side of bench/run_calls (Debian
// libcaf-dev; bench/run_calls compiles it with g++ -O2 into its temporary
// directory: m0's build is C only).
//
//   calls_caf call N SIZE CALLER_CPU ACTOR_CPU  a scoped_actor's request(...).receive to a pong actor
//   calls_caf send N SIZE CALLER_CPU ACTOR_CPU  N sends from a scoped_actor, then a request for the count
//
// One line of JSON on stdout, as bench/calls_m0.c prints; exit 1 on a
// wrong answer or a lost message. Pinning as calls_m0.c: main pins itself
// to ACTOR_CPU before the actor system starts (its scheduler, one worker,
// and its other threads inherit it), then moves to CALLER_CPU, where the
// scoped_actor runs.
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "caf/all.hpp"

using namespace caf;

using ping_atom = atom_constant<atom("ping")>;
using tick_atom = atom_constant<atom("tick")>;
using count_atom = atom_constant<atom("count")>;

namespace {

struct pong_state {
  uint64_t ticks = 0;
};

behavior pong(stateful_actor<pong_state>* self) {
  return {
      [](ping_atom, const std::string& s) { return s; },
      [=](tick_atom, const std::string&) { self->state.ticks++; },
      [=](count_atom) { return self->state.ticks; },
  };
}

int pin(int cpu) {
  cpu_set_t s;
  CPU_ZERO(&s);
  CPU_SET(cpu, &s);
  return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int calls(scoped_actor& self, const actor& p, long n, size_t size) {
  std::vector<int64_t> ns(static_cast<size_t>(n));
  std::string buf(size, 'a');
  bool ok = true;
  int64_t t0 = now_ns();
  for (long i = 0; i < n && ok; i++) {
    if (size) buf[0] = static_cast<char>(i);
    int64_t a = now_ns();
    self->request(p, infinite, ping_atom::value, buf)
        .receive([&](const std::string& r) { ok = r == buf; },
                 [&](error& e) {
                   std::fprintf(stderr, "calls_caf: call %ld: %s\n", i + 1, to_string(e).c_str());
                   ok = false;
                 });
    ns[static_cast<size_t>(i)] = now_ns() - a;
  }
  int64_t total = now_ns() - t0;
  if (!ok) {
    std::fprintf(stderr, "calls_caf: a wrong or no answer\n");
    return 1;
  }
  std::sort(ns.begin(), ns.end());
  long k99 = std::max(0L, static_cast<long>(static_cast<double>(n) * 0.99 + 0.5) - 1);
  std::printf("{\"arm\": \"caf-call\", \"n\": %ld, \"median_us\": %.3f, \"p99_us\": %.3f, \"per_s\": %.1f, "
              "\"refused\": 0}\n",
              n, static_cast<double>(ns[static_cast<size_t>(n / 2)]) / 1e3,
              static_cast<double>(ns[static_cast<size_t>(k99)]) / 1e3,
              static_cast<double>(n) * 1e9 / static_cast<double>(total));
  return 0;
}

int64_t count(scoped_actor& self, const actor& p) {
  int64_t c = -1;
  self->request(p, infinite, count_atom::value)
      .receive([&](uint64_t v) { c = static_cast<int64_t>(v); }, [&](error&) {});
  return c;
}

int sends(scoped_actor& self, const actor& p, long n, size_t size) {
  std::string buf(size, 'a');
  int64_t base = count(self, p);
  int64_t t0 = now_ns();
  for (long i = 0; i < n; i++) self->send(p, tick_atom::value, buf);
  int64_t got = count(self, p);
  int64_t total = now_ns() - t0;
  if (base < 0 || got - base != n) {
    std::fprintf(stderr, "calls_caf: %ld sent, the actor counted %lld\n", n, static_cast<long long>(got - base));
    return 1;
  }
  std::printf("{\"arm\": \"caf-send\", \"n\": %ld, \"seconds\": %.6f, \"per_s\": %.1f, \"refused\": 0}\n", n,
              static_cast<double>(total) / 1e9, static_cast<double>(n) * 1e9 / static_cast<double>(total));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 6 || (std::strcmp(argv[1], "call") && std::strcmp(argv[1], "send"))) {
    std::fprintf(stderr, "usage: calls_caf call|send N SIZE CALLER_CPU ACTOR_CPU\n");
    return 2;
  }
  long n = std::atol(argv[2]);
  size_t size = static_cast<size_t>(std::atol(argv[3]));
  if (n < 1 || pin(std::atoi(argv[5])) != 0) return 2;
  actor_system_config cfg;
  cfg.set("scheduler.max-threads", static_cast<size_t>(1));
  int rv;
  {
    actor_system sys{cfg};
    auto p = sys.spawn(pong);
    if (pin(std::atoi(argv[4])) != 0) return 2;
    scoped_actor self{sys};
    rv = std::strcmp(argv[1], "call") == 0 ? calls(self, p, n, size) : sends(self, p, n, size);
    anon_send_exit(p, exit_reason::user_shutdown);
  }
  return rv;
}
