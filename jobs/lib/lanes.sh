# Sourced by .ci/run and jobs/test.sh: every lane timed, one closing table.
#   lanes_begin           starts the clock and the record (VITKD_LANE_LOG, a file;
#                         a caller that already began one, e.g. .ci/run around
#                         jobs/test.sh, keeps it: the nested script adds its rows)
#   lane NAME CMD...      runs CMD as lane NAME: prints `lane NAME: N s` and records
#                         "NAME SECONDS EXIT FREE_GIB"; returns CMD's exit code. A lane
#                         that fails with under VITKD_LOW_DISK_GIB (default 5) GiB free
#                         on the working folder's disk says so in one line: a full disk
#                         fails compilers and HDF5 writes with messages far from the cause
#   lanes_table           the table: each lane, its seconds, the GiB free after it and
#                         its exit code, and the total since lanes_begin
#   lanes_disk_check      one warning line when under VITKD_MIN_DISK_GIB (default 20)
#                         GiB are free at the start
#   lanes_guard WARN_S FAIL_S
#                         past WARN_S one warning line naming the three slowest
#                         lanes; past FAIL_S one line and exit 1, naming them too
lanes_begin() {
  if [ -z "${VITKD_LANE_LOG:-}" ]; then
    VITKD_LANE_LOG=$(mktemp /tmp/vitkd-lanes.XXXXXX)
    VITKD_LANES_T0=$(date +%s)
    VITKD_LANES_OWNER=$$
    export VITKD_LANE_LOG VITKD_LANES_T0
  fi
}

# True in the script that began the record (it prints the table).
lanes_owner() { [ "${VITKD_LANES_OWNER:-}" = "$$" ]; }

# GiB free on the disk that holds the working folder.
lanes_free_gib() { df -P -BG . | awk 'NR == 2 { sub("G", "", $4); print $4 }'; }

lanes_disk_check() {
  local free min=${VITKD_MIN_DISK_GIB:-20}
  free=$(lanes_free_gib)
  echo "lanes: ${free} GiB free on the disk of $(pwd)"
  if [ "$free" -lt "$min" ]; then
    echo "lanes: warning: ${free} GiB free, under the ${min} GiB wanted (the builds and the PyPI virtual environment take about 11); a lane may fail for want of space" >&2
  fi
}

lane() {
  local name=$1 t0 rc=0 dt free
  shift
  t0=$(date +%s)
  echo "==== lane $name: $*"
  "$@" || rc=$?
  dt=$(( $(date +%s) - t0 ))
  free=$(lanes_free_gib)
  echo "$name $dt $rc $free" >> "$VITKD_LANE_LOG"
  echo "lane $name: $dt s$([ "$rc" = 0 ] || echo ", exit $rc")"
  if [ "$rc" != 0 ] && [ "$free" -lt "${VITKD_LOW_DISK_GIB:-5}" ]; then
    echo "lane $name: only $free GiB are free on the disk of $(pwd): the failure may be a full disk (df -h; remove old build folders and runs)" >&2
  fi
  return "$rc"
}

lanes_table() {
  local total=$(( $(date +%s) - VITKD_LANES_T0 ))
  echo "---- lanes (wall seconds, GiB free after) ----"
  awk -v total="$total" '
    { printf "%-28s %6d s %5s GiB%s\n", $1, $2, $4, ($3 == 0 ? "" : "   exit " $3); sum += $2 }
    END { printf "%-28s %6d s\n%-28s %6d s\n", "(sum of lanes)", sum, "total", total }' "$VITKD_LANE_LOG"
}

lanes_guard() {
  local warn=$1 limit=$2 total slowest
  total=$(( $(date +%s) - VITKD_LANES_T0 ))
  slowest=$(sort -k2,2nr "$VITKD_LANE_LOG" | head -3 | awk '{printf "%s%s (%s s)", (NR > 1 ? ", " : ""), $1, $2}')
  if [ "$total" -gt "$limit" ]; then
    echo "ci: took $total s, past the ${limit}-s guard (CI's hard limit is 5400 s); the slowest lanes: $slowest" >&2
    return 1
  fi
  if [ "$total" -gt "$warn" ]; then
    echo "ci: warning: took $total s, past ${warn} s (the guard fails at ${limit} s); the slowest lanes: $slowest" >&2
  fi
}
