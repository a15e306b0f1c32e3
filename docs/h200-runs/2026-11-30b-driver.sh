#!/usr/bin/env bash
# 2026-11-30b, one call: issue 23's small training step on the host, op by op (information only,
# `-mlp-host-profile-driver.sh`), then issue 21's quick sweep of the four norm ops at aa4aae1
# (LayerNorm's narrow float32 forward clusters by pushes), as 2026-11-29i's sweep driver.
#   timeout 590 bash docs/h200-runs/2026-11-30b-driver.sh
export OUT=${OUT:-/tmp/opgen-out}
timeout 200 bash docs/h200-runs/2026-11-30b-mlp-host-profile-driver.sh > "$OUT/mlp-host-profile-driver.log" 2>&1
echo "== profile exit $? at $SECONDS s"
timeout $((585 - SECONDS)) bash docs/h200-runs/2026-11-29i-norm-sweep-driver.sh > "$OUT/sweep-driver.log" 2>&1
echo "== sweep exit $? at $SECONDS s"
