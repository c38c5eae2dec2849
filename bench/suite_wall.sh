#!/usr/bin/env bash
# Wall time of the whole pytest suite in a clone (issue 26: the tiered suite against an older one).
# Run two at the same time, one per clone, so they share the machine's load:
#   bench/suite_wall.sh /path/to/clone-a > a.log 2>&1 & bench/suite_wall.sh /path/to/clone-b > b.log 2>&1 &
# Each clone must be bootstrapped (scripts/bootstrap). Prints the CPU, its flags and the load before and after.
set -uo pipefail
clone=${1:?clone directory}
shift
cd "$clone"
grep -m1 "model name" /proc/cpuinfo
echo "flags: $(grep -m1 -o -w -E 'avx2|avx512_vnni|avx_vnni' /proc/cpuinfo | sort -u | tr '\n' ' ') cores: $(nproc)"
echo "commit: $(git log --oneline -1)"
echo "load before: $(cat /proc/loadavg)"
start=$(date +%s.%N)
.venv/bin/python -m pytest -q -p no:cacheprovider "$@"
rc=$?
end=$(date +%s.%N)
echo "load after: $(cat /proc/loadavg)"
echo "pytest exit $rc, wall $(echo "$end - $start" | bc) s"
