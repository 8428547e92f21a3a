#!/bin/sh
# Re-measures every figure docs/results.md gives, in one run, and keeps each command's report in
# docs/results/ (FILE.txt is what it printed, FILE.json its rows).  Run from the repository root after
# `make test` has made .venv:  sh tools/remeasure.sh
# Takes about half an hour on a 2-core machine with a warm compile cache.
set -eu
out=docs/results
bin=.venv/bin
mkdir -p "$out"
run() {  # run NAME ARGS...: ember-bench ARGS, its report to NAME.txt, its rows to NAME.json, its time logged
    name=$1
    shift
    start=$(date +%s)
    "$bin/ember-bench" "$@" --json "$out/$name.json" > "$out/$name.txt"
    echo "$name: ember-bench $* ($(($(date +%s) - start)) s)" >> "$out/RUN.txt"
}
{
    echo "commit $(git rev-parse --short HEAD), $(date -u '+%Y-%m-%d %H:%M UTC'), $(nproc) cores"
    echo "load before the run: $(cut -d' ' -f1-3 /proc/loadavg)"
} > "$out/RUN.txt"
run quick --suite quick
run quick-ideal-dram --suite quick --machine ideal-dram
run paper --suite paper --timing-only
run vs-gpu --vs-gpu --suite paper --timing-only
run representations --suite representations
run huge --suite huge --timing-only --speed
run engines --suite quick --only RM3 --variants O0,O3,hand,core --compare-engines
echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/RUN.txt"
