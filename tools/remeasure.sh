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
# one assumption of the default machine at a time, halved and doubled (docs/results.md, "How the ratios move")
run set-mispredict-7 --suite quick --set execute.mispredict_penalty=7
run set-mispredict-28 --suite quick --set execute.mispredict_penalty=28
run set-fp-latency-2 --suite quick --set execute.fp_alu_latency=2 --set execute.fp_mul_latency=2
run set-fp-latency-8 --suite quick --set execute.fp_alu_latency=8 --set execute.fp_mul_latency=8
run set-issue-3 --suite quick --set execute.issue_width=3
run set-issue-10 --suite quick --set execute.issue_width=10
run set-dram-2ch --suite quick --set dram.channels=2
run set-dram-8ch --suite quick --set dram.channels=8
echo "load after the run: $(cut -d' ' -f1-3 /proc/loadavg)" >> "$out/RUN.txt"
