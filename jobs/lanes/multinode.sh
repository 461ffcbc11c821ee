#!/usr/bin/env bash
# The multinode lane: `ctest -L multinode`, vitkd on a simulated 3-node Slurm
# cluster (tests/cluster, docs/cluster.md). Where this machine cannot make
# network namespaces (not root, no CAP_NET_ADMIN) the tests skip: the lane then
# says so in one line and exits 77, so that its row is not a pass (under CI,
# VITKD_REQUIRE_SLURM=1, the tests fail instead). Budget: 6 minutes; past it,
# one line and exit 1.
set -euo pipefail
cd "$(dirname "$0")/../.."
BUDGET_S=${VITKD_MULTINODE_BUDGET_S:-360}
t0=$(date +%s)
log=$(mktemp /tmp/vitkd-multinode.XXXXXX)
trap 'rm -f "$log"' EXIT
rc=0
ctest --test-dir build --output-on-failure -L multinode --timeout 300 2>&1 | tee "$log" || rc=$?
dt=$(( $(date +%s) - t0 ))
[ "$rc" = 0 ] || exit "$rc"
if grep -q "Not Run\|Skipped" "$log"; then
  why=$(grep -m1 "^SKIP: " "$log" || echo "see the ctest output above")
  echo "lane multinode: not run here: ${why#SKIP: }" >&2
  exit 77
fi
grep -q "tests passed" "$log" || { echo "lane multinode: ctest ran no multinode test (is build/ configured?)" >&2; exit 1; }
if [ "$dt" -gt "$BUDGET_S" ]; then
  echo "lane multinode: took $dt s, past its budget of $BUDGET_S s (VITKD_MULTINODE_BUDGET_S)" >&2
  exit 1
fi
