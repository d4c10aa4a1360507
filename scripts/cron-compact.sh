#!/usr/bin/env bash
# Batch compaction for cron: compacts every session over its threshold whose newest message is
# older than 10 minutes, with 8 concurrent LLM calls. Safe to run on several hosts at once
# (sessions are claimed with leases). When the LLM fails or its summary is rejected, the
# extractive summary is written instead (--fallback extractive: every session still comes
# under its window; the log names the sessions that fell back and why).
# CTXTOOL_COMPACT_FALLBACK=none leaves such a session for the next run instead. Exit codes: 0 done, 4 some sessions failed or stay over
# their window, 1 error, 2 usage error, 3 schema not current.
#
#   */10 * * * * CTXTOOL_DATABASE_URL=mysql+pymysql://ctx:...@db/agents OPENAI_API_KEY=... \
#       /opt/ctxtool/scripts/cron-compact.sh >> /var/log/ctxtool-compact.log 2>&1
#
# cron runs with PATH=/usr/bin:/bin, where a venv install's `ctxtool` is not: the command is
# $CTXTOOL if set, else the checkout's own .venv/bin/ctxtool, else `ctxtool` on PATH.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [[ -z "${CTXTOOL:-}" ]]; then
    if [[ -x "$here/../.venv/bin/ctxtool" ]]; then
        CTXTOOL="$here/../.venv/bin/ctxtool"
    elif command -v ctxtool >/dev/null 2>&1; then
        CTXTOOL=ctxtool
    else
        echo "$(date -u +%FT%TZ) cron-compact.sh: no ctxtool found: set CTXTOOL=/path/to/ctxtool," \
             "or install into $here/../.venv" >&2
        exit 1
    fi
fi
WORKERS=${CTXTOOL_COMPACT_WORKERS:-8}
OLDER_THAN=${CTXTOOL_COMPACT_OLDER_THAN:-10m}
FALLBACK=${CTXTOOL_COMPACT_FALLBACK:-extractive}

echo "$(date -u +%FT%TZ) compact --all start"
status=0
"$CTXTOOL" compact --all --workers "$WORKERS" --older-than "$OLDER_THAN" \
    --fallback "$FALLBACK" --nl "$@" || status=$?
echo "$(date -u +%FT%TZ) compact --all exit $status"
exit "$status"
