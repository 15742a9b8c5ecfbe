# bench/callgrind.sh — sourced by bench/profile_callgrind and bench/profile_trace:
# one server under valgrind --tool=callgrind, loaded by wrk, its user-space
# instructions counted between a zero and a dump (so start-up and warm-up are
# not in the figure). The caller sets dir (a temporary directory), conns and
# secs, and traps EXIT to kill "$vpid".

vpid=

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# cg_start NAME PROBE_URL CMD...: starts CMD under callgrind (profile
# $dir/NAME.<pid>.1 after the dump, its output in $dir/NAME.log) and waits up
# to 30 s for PROBE_URL to answer.
cg_start() {
  local name=$1 probe=$2
  shift 2
  valgrind --tool=callgrind --callgrind-out-file="$dir/$name.%p" "$@" >"$dir/$name.log" 2>&1 &
  vpid=$!
  for _ in $(seq 300); do
    curl -s -o /dev/null "$probe" && return 0
    kill -0 "$vpid" 2>/dev/null || { cat "$dir/$name.log" >&2; exit 1; }
    sleep 0.1
  done
  echo "callgrind: $* did not answer $probe within 30 s" >&2
  exit 1
}

# cg_measure URL [HOOK]: 1 s of warm-up, zero the counts, $secs s of wrk
# with $conns connections, dump; runs HOOK (if given) just after the zero and
# just after the dump. Prints the requests wrk made.
cg_measure() {
  local url=$1 hook=${2:-:} out
  wrk -t1 -c"$conns" -d1s "$url" >/dev/null
  callgrind_control -z "$vpid" >/dev/null 2>&1
  $hook zeroed
  out=$(wrk -t1 -c"$conns" -d"${secs}s" "$url")
  callgrind_control -d "$vpid" >/dev/null 2>&1
  $hook dumped
  sed -n 's/^ *\([0-9]*\) requests in.*/\1/p' <<<"$out"
}

# cg_stop: SIGTERM to the server and wait for it.
cg_stop() {
  kill -TERM "$vpid"
  wait "$vpid" 2>/dev/null || true
  vpid=
}

# cg_total PROFILE: its total instruction count.
cg_total() { callgrind_annotate "$1" 2>/dev/null | sed -n 's/^ *\([0-9,]*\) .*PROGRAM TOTALS.*/\1/p' | tr -d ,; }
