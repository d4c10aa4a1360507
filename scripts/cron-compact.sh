#!/usr/bin/env bash
# Batch compaction for cron: compacts every session over its threshold whose newest message is
# older than 10 minutes, with 8 concurrent LLM calls. Safe to run on several hosts at once
# (sessions are claimed with leases). Exit codes: 0 done, 4 some sessions failed, 1 error,
# 3 schema not current.
#
#   */10 * * * * CTXTOOL_DATABASE_URL=mysql+pymysql://ctx:...@db/agents OPENAI_API_KEY=... \
#       /opt/ctxtool/scripts/cron-compact.sh >> /var/log/ctxtool-compact.log 2>&1
set -euo pipefail
CTXTOOL=${CTXTOOL:-ctxtool}
WORKERS=${CTXTOOL_COMPACT_WORKERS:-8}
OLDER_THAN=${CTXTOOL_COMPACT_OLDER_THAN:-10m}

echo "$(date -u +%FT%TZ) compact --all start"
status=0
"$CTXTOOL" compact --all --workers "$WORKERS" --older-than "$OLDER_THAN" --nl "$@" || status=$?
echo "$(date -u +%FT%TZ) compact --all exit $status"
exit "$status"
