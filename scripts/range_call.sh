#!/usr/bin/env bash
# One device call of the range check (issue 14), resuming from .deploy/deploy.db.xz; the storage
# comes back under $OUT. Usage: bash scripts/range_call.sh LIMIT_S PAIRS NAME
limit=$1; pairs=$2; name=$3
source scripts/gpu-host.sh
mkdir -p /tmp/dw
if [ ! -f /tmp/dw/.unpacked ]; then rm -f /tmp/dw/deploy.db*; xz -dc .deploy/deploy.db.xz > /tmp/dw/deploy.db; touch /tmp/dw/.unpacked; fi
# trials left RUNNING by the previous call's killed process (another host: its PID tells nothing)
python3 -c "
import sqlite3; c=sqlite3.connect('/tmp/dw/deploy.db')
print('stale trials failed:', c.execute(\"update trials set state='FAIL', datetime_complete=datetime('now') where state='RUNNING'\").rowcount); c.commit()"
timeout -k 5 -s INT "$limit" python experiments/deploy_check.py parts=b sizes=7 pairs="$pairs" work=/tmp/dw out=/tmp/dwo > "$OUT/${name}.log" 2>&1
echo "rc=$?" >> "$OUT/${name}.log"
cp /tmp/dwo/deploy_check.json "$OUT/${name}.json" 2>/dev/null
python3 -c "import sqlite3; c=sqlite3.connect('/tmp/dw/deploy.db'); print(c.execute('pragma wal_checkpoint(TRUNCATE)').fetchall()); c.close()"
xz -T0 -c /tmp/dw/deploy.db > "$OUT/deploy.db.xz"
tail -25 "$OUT/${name}.log"
