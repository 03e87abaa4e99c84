#!/usr/bin/env bash
# Runs each fuzz target for a short time: test/fuzz-short.sh FUZZTIME
# package:Target... (make fuzz-short). Every target runs, and any that
# fails fails the whole run.
#
# Go's fuzz coordinator can fail a run that found nothing with a bare
# "context deadline exceeded" when -fuzztime elapses on a loaded machine:
# it applies -fuzztime as a context deadline and tells that deadline from
# a real failure by comparing two contexts' errors, which a preempted
# cancellation can catch half done. Such a run wrote no failing input and
# is tried once more; a run that writes one, or fails any other way,
# fails.
set -uo pipefail
go=${GO:-go}
fuzztime=$1
shift
failed=0
for t in "$@"; do
	pkg=${t%%:*}
	name=${t##*:}
	for attempt in 1 2; do
		echo "fuzz $pkg $name for $fuzztime"
		log=$(mktemp)
		"$go" test -run '^$' -fuzz "^${name}\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"
		status=$?
		if [ "$status" -eq 0 ]; then
			rm -f "$log"
			break
		fi
		if [ "$attempt" -eq 1 ] && grep -qx '    context deadline exceeded' "$log" && ! grep -q 'Failing input written to' "$log"; then
			echo "fuzz $pkg $name: the coordinator's own deadline, no failing input; once more"
			rm -f "$log"
			continue
		fi
		rm -f "$log"
		failed=1
		break
	done
done
exit "$failed"
